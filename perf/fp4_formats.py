#!/usr/bin/python3
"""Why the outer sync's 4-bit format is e2m1 and not e3m0 (docs/api.md).

Both with one fp32 scale per block of 64 elements (the block's absmax mapped to the top
code), rounded to the nearest representable value. Prints the relative RMS error and the
cosine to the original for Gaussian, Laplace and Student-t(3) data (2^20 values each).
"""
import numpy as np

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6]) / 6      # sign, 2 exponent bits, 1 mantissa bit
E3M0 = np.array([0] + [2.0 ** (c - 7) for c in range(1, 8)])  # sign, 3 exponent bits: 2^-6 .. 1, and 0


def quantise(x, grid, block=64):
    x = x.reshape(-1, block)
    scale = np.abs(x).max(axis=1, keepdims=True)
    y = np.abs(x) / scale
    nearest = np.abs(y[..., None] - grid).argmin(axis=-1)
    return (np.sign(x) * grid[nearest] * scale).ravel()


def main():
    rng = np.random.default_rng(0)
    data = {"gaussian": rng.standard_normal(1 << 20), "laplace": rng.laplace(size=1 << 20),
            "student-t(3)": rng.standard_t(3, 1 << 20)}
    print("data          format  relative RMS error  cosine")
    for name, x in data.items():
        for fmt, grid in (("e2m1", E2M1), ("e3m0", E3M0)):
            q = quantise(x, grid)
            rel = np.sqrt(((q - x) ** 2).mean() / (x ** 2).mean())
            cos = q @ x / np.linalg.norm(q) / np.linalg.norm(x)
            print(f"{name:13s} {fmt:6s}  {rel:18.3f}  {cos:6.4f}")


if __name__ == "__main__":
    main()
