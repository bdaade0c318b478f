#!/usr/bin/env python3
"""Writes a file's bytes as llm.c token shards for strata-train --data (byte-level tokens, so
--vocab 256 holds them; the tests train on them and compare with the text file itself).

    training/write_shard.py TEXT TRAIN.bin              every byte, one token each
    training/write_shard.py TEXT TRAIN.bin VAL.bin      the last tenth of the bytes (what
                                                        strata-train validates on for TEXT)
                                                        to VAL.bin, the rest to TRAIN.bin

A shard is llm.c's layout: 256 little-endian int32 (magic 20240520, version 1, the token
count, then zeros), then the tokens as little-endian uint16.
"""
import argparse
import struct

MAGIC, VERSION, HEADER_INTS = 20240520, 1, 256


def write_shard(path, tokens):
    header = [MAGIC, VERSION, len(tokens)] + [0] * (HEADER_INTS - 3)
    with open(path, "wb") as f:
        f.write(struct.pack(f"<{HEADER_INTS}i", *header))
        f.write(struct.pack(f"<{len(tokens)}H", *tokens))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("text")
    p.add_argument("train")
    p.add_argument("val", nargs="?")
    a = p.parse_args()
    data = open(a.text, "rb").read()
    if a.val is None:
        write_shard(a.train, data)
        return
    split = len(data) - len(data) // 10
    write_shard(a.train, data[:split])
    write_shard(a.val, data[split:])


if __name__ == "__main__":
    main()
