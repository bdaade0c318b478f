"""Strata from Python.

`import strata.torch` registers the torch.distributed backend "strata" (docs/torch.md).
"""
