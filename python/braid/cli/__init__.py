"""The ``braid`` command line.

Every user mistake ends with one line ``error: <what>: <expected>`` on stderr and exit code 2;
Ctrl-C ends with exit code 130, SIGTERM with 143, and neither leaves a half-written results
folder.

Commands are registered one way: each module named in ``COMMAND_MODULES`` (at the bottom) defines
``COMMANDS``, the click commands or groups it adds, each named by its decorator or function. Adding
a command is one module in this package and its name in that list (tests/test_cli.py checks that
every module of the package but the ``_``-prefixed helpers is listed, and that no name is taken
twice). Commands import what they run inside their body, so ``braid --help`` stays quick.
"""

from __future__ import annotations

import os
import sys
from importlib import import_module

import click

from .. import signals
from ..scenario import BraidError
from ..signals import Terminated

EXIT_USAGE = 2


def _err(msg: str) -> None:
    click.echo(f"error: {msg}", err=True)


def _stopped(msg: str, code: int) -> None:
    """Exit after Ctrl-C or SIGTERM without running interpreter-exit hooks. The stop terminated
    the worker processes; CPython 3.11's ProcessPoolExecutor exit hook can then race its own
    management thread and print a "Bad file descriptor" traceback (fixed in 3.12). Everything a
    run keeps is written atomically before this point and the `with` blocks have closed, so
    skipping the hooks loses nothing."""
    click.echo(msg, err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class BraidGroup(click.Group):
    """A click group that turns user mistakes into one-line errors with exit code 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # noqa: D401
        from ..scenario import ScenarioError

        signals.install()
        try:
            rv = super().main(args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False, **extra)
        except click.exceptions.Exit as e:  # pragma: no cover - click returns it instead
            sys.exit(e.exit_code)
        except Terminated:
            _stopped("terminated", 143)
        except click.exceptions.Abort as e:
            # click turns KeyboardInterrupt (and so SIGTERM's Terminated) into Abort.
            if isinstance(e.__cause__ or e.__context__, Terminated):
                _stopped("terminated", 143)
            _stopped("interrupted", 130)
        except KeyboardInterrupt:
            _stopped("\ninterrupted", 130)
        except click.UsageError as e:
            cmd = e.ctx.command_path if e.ctx is not None else "braid"
            _err(f"{e.format_message()} (see '{cmd} --help')")
            sys.exit(EXIT_USAGE)
        except click.ClickException as e:
            _err(e.format_message())
            sys.exit(e.exit_code)
        except ScenarioError as e:
            path = getattr(e, "path", "") or "scenario"
            _err(f"{path}: {getattr(e, 'message', str(e))}")
            sys.exit(EXIT_USAGE)
        except BraidError as e:
            _err(str(e))
            sys.exit(EXIT_USAGE)
        except OSError as e:
            # Output that cannot be written (a full disk, a read-only or vanished folder) found
            # where no caller named it: still one line naming the file, never a traceback.
            from ..results import output_error

            _err(str(output_error(e.filename or "output", e)))
            sys.exit(EXIT_USAGE)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=BraidGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="braid", message="braid %(version)s")
def main() -> None:
    """braid: multi-tenant, multi-path RDMA for datacenters, and a packet-level RoCEv2 simulator.

    Start with `braid demo`; scenarios are TOML files (see docs/scenario.md, `braid schema`)."""


#: The command modules: this package's modules that define ``COMMANDS`` (click lists the commands
#: by name, so the order here does not matter).
COMMAND_MODULES = ("run", "demo", "report", "bench", "compare", "plot", "sweep", "reproduce", "drum", "perftest", "hpcc")


def _register() -> None:
    for module in COMMAND_MODULES:
        for cmd in import_module(f"{__name__}.{module}").COMMANDS:
            if cmd.name in main.commands:
                raise RuntimeError(f"braid.cli.{module}: the command name {cmd.name!r} is taken already")
            main.add_command(cmd)


_register()
