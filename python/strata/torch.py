"""Registers Strata as torch.distributed's backend "strata".

    import strata.torch
    torch.distributed.init_process_group("strata")   # under torchrun, strata-run, or with an init_method

The process group is Strata's (strata._torch_backend): rank 0 makes a unique id and passes
it through the store torch gives every backend, and the group's timeout is the
communicators' timeout. Host (CPU) tensors. See docs/torch.md.

Under strata-run, which sets STRATA_* variables rather than torch's, importing this module
fills in torch's env:// variables from them (only those not set already): RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, and MASTER_ADDR/MASTER_PORT from STRATA_ROOT,
whose port is free because the backend does not bootstrap through it.
"""
import inspect
import os

import torch.distributed as dist

from strata._torch_backend import ProcessGroupStrata, torch_version_built

__all__ = ["ProcessGroupStrata"]

_built = tuple(int(x) for x in torch_version_built.split("."))
_running = tuple(int(x) for x in __import__("torch").__version__.split("+")[0].split(".")[:2])
if _built != _running:
    raise ImportError(f"strata._torch_backend was built against torch {torch_version_built}, "
                      f"but this python3 has torch {'.'.join(map(str, _running))}: rebuild Strata with this interpreter "
                      f"(cmake -DPython3_EXECUTABLE=...)")


def _create(options, pg_options=None):
    # Torch's extended form (extended_api=True): it also says which global ranks the group has.
    timeout = options.timeout
    return ProcessGroupStrata(options.store, options.group_rank, options.group_size, timeout,
                              list(options.global_ranks_in_group))


def _register():
    if "STRATA" in dist.Backend._plugins:  # imported twice (e.g. as __main__'s and a module's)
        return
    kwargs = {"extended_api": True}
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        kwargs["devices"] = ["cpu"]  # torch >= 2.1; CUDA tensors wait for the library's device path
    dist.Backend.register_backend("strata", _create, **kwargs)


def _env_from_strata_run():
    """torch's env:// variables from strata-run's, where torch's are absent."""
    env = os.environ
    if "STRATA_RANK" not in env or "RANK" in env:
        return
    host, _, port = env.get("STRATA_ROOT", "").rpartition(":")
    values = {"RANK": env["STRATA_RANK"], "WORLD_SIZE": env.get("STRATA_WORLD_SIZE", "1"),
              "LOCAL_RANK": env.get("STRATA_LOCAL_RANK", env["STRATA_RANK"]),
              "LOCAL_WORLD_SIZE": env.get("STRATA_LOCAL_SIZE", env.get("STRATA_WORLD_SIZE", "1"))}
    if host and port:
        values.update(MASTER_ADDR=host.strip("[]"), MASTER_PORT=port)
    for k, v in values.items():
        env.setdefault(k, v)


_register()
_env_from_strata_run()
