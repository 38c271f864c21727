"""braid: multi-tenant, multi-path RDMA for datacenters, and a packet-level RoCEv2 simulator.

Quick use::

    import braid
    r = braid.run("scenario.toml", seed=1, overrides=["transport.kind=none"], out_dir="results/x")
    r.flows          # polars DataFrame, one row per flow
    r.headline       # dict of headline figures

See ``braid --help`` for the command line and ``docs/scenario.md`` for the scenario format.
"""

from ._core import ScenarioError, __version__
from .scenario import BraidError, Scenario, load_scenario

# The API pulls in polars; load it on first use so that `import braid` (and the CLI's start) stay
# light.
_LAZY = {
    "run": "api",
    "validate": "api",
    "estimate": "api",
    "RunResult": "api",
    "read_results": "api",
    # The subpackage itself (`braid.sweep.sweep(...)`, docs/sweep.md).
    "sweep": "sweep",
    "write_results": "results",
}
_SUBPACKAGES = {"sweep"}


def __getattr__(name):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'braid' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(f".{mod}", __name__)
    value = module if name in _SUBPACKAGES else getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    # The lazy names are attributes too: dir(braid) and tab completion list them before first use.
    return sorted(set(globals()) | set(_LAZY))


def scenario_schema() -> str:
    """The scenario format as JSON Schema text."""
    from ._core import scenario_schema as _s

    return _s()


__all__ = [
    "__version__",
    "BraidError",
    "RunResult",
    "estimate",
    "Scenario",
    "ScenarioError",
    "load_scenario",
    "read_results",
    "run",
    "scenario_schema",
    "sweep",
    "validate",
    "write_results",
]
