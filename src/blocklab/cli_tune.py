"""`blocklab tune`: search several knobs at once, race the candidates, confirm the winner
(the library is blocklab.tune; this module parses, prints and exits)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from .cli_errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, fail, print_warning
from .cli_fleet import fleet_run_options, parse_hosts, trust_words, wants_fleet
from .console import make_console
from .engines.base import EngineError
from .paths import results_root
from .results import ResultsError, ResultsWriteError, RunDir, new_run_dir
from .runner import Interrupted
from .spec import SpecError


@click.command("tune")
@click.argument("target", required=False)
@click.option("--budget", type=str, metavar="CELLS|DURATION",
              help="what the tune may spend, the confirmation included: cells (60) or a duration (90s, 20m, 1h30m); "
                   "default: the experiment's [tune] budget")
@click.option("--seed", type=int, help="random seed of the optimiser and the block orders (drawn and recorded if absent)")
@click.option("--out", type=click.Path(path_type=Path), help="results directory (default results/NAME-TIMESTAMP)")
@click.option("--resume", type=click.Path(path_type=Path, file_okay=False), help="continue an interrupted tune in this directory")
@fleet_run_options  # --fleet, --hosts, --certs, --insecure, --share-disk, --fleet-timeout (cli_fleet.py)
def tune_command(target: str | None, budget: str | None, seed: int | None, out: Path | None, resume: Path | None, **fleet: Any) -> None:
    """Search the experiment's knobs (sets or ranges) for the best configuration,
    judge the candidates in a race of randomised blocks beside the incumbent and
    the default, and confirm the winner on fresh blocks.

    \b
    Examples:
      blocklab tune my-space.toml --budget 60
      blocklab tune my-space.toml --budget 20m --seed 3 --out results/tune-today
      blocklab tune --resume results/tune-space-20261126-130000
      blocklab tune my-space.toml --budget 60 --fleet tls://sched:8786   # each host its own tune; do they agree?
      blocklab tune --resume results/tune-space-20261126-140000 --fleet tls://sched:8786   # on the hosts it started with
    """
    from .tune.session import load_saved_tune, load_tune, run_tune

    console = make_console()

    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False)

    def warn(text: str) -> None:  # stderr: stdout holds the tune's progress and result only
        print_warning(console, text)

    if wants_fleet(None, fleet):
        return _tune_on_fleet(console, say, warn, target, budget, seed, out, resume, **fleet)
    try:
        if resume is not None:
            if is_fleet_tune(resume):
                raise SpecError(f"--resume {resume}: this tune ran on a fleet; resume it with --resume {resume} --fleet ADDRESS "
                                "(its scheduler; and --insecure or --certs as it started)")
            if target or budget or seed is not None or out:
                raise SpecError("--resume continues a tune exactly as it started: give no FILE/RECIPE, --budget, --seed or --out")
            setup = load_saved_tune(resume)
            run_dir = RunDir(resume)
        else:
            if not target:
                raise SpecError("give an experiment FILE whose [knobs] are the space to search (or --resume DIR)")
            if out is not None and (out / "tune-spec.json").exists():
                raise SpecError(f"--out {out}: already holds a tune; continue it with --resume {out}, or choose another --out")
            setup = load_tune(target, budget=budget, seed=seed)
            run_dir = RunDir(out) if out else new_run_dir(results_root(), setup.exp.spec.name)
    except (SpecError, ResultsError) as err:
        fail(console, str(err), EXIT_BAD_INPUT)
    except EngineError as err:
        fail(console, str(err), EXIT_FAILED)
    say(f"results: {run_dir.path}")
    say(f"space: {setup.spec.size():,} configurations of {', '.join(d.name + ' ' + d.describe() for d in setup.dimensions)}; "
        f"budget {setup.spec.budget.text()}; seed {setup.exp.seed}")
    try:
        state = run_tune(setup, run_dir, say=say, resume=resume is not None, warn=warn)
    except Interrupted as err:
        console.print(f"{err}; continue with: blocklab tune --resume {run_dir.path}", markup=False, highlight=False)
        sys.exit(EXIT_INTERRUPTED)
    except (SpecError, ResultsError) as err:
        fail(console, str(err), EXIT_BAD_INPUT)
    except (EngineError, ResultsWriteError) as err:
        fail(console, f"{err}\nwhat was measured is kept: continue with blocklab tune --resume {run_dir.path}", EXIT_FAILED)
    _print_result(say, state, run_dir)


def _print_result(say: Callable[[str], object], state: dict[str, Any], run_dir: RunDir) -> None:
    conf = state.get("confirmation") or {}
    say(conf.get("verdict", ""))
    say(f"spent {state['spent_cells']} cells ({state['measured_cells']} measured, restarts priced as {state['restart_cells']}), "
        f"{state['rounds']} rounds")
    if state.get("importance"):
        say("importance: " + ", ".join(f"{k} {v:.2f}" for k, v in state["importance"].items()))
    if state.get("recommended") == state.get("default") and state.get("winner") != state.get("default"):
        say("keep the default; the search's winner (not shown better than the default on fresh blocks) was:")
    else:
        say("the winner, to paste:")
    for line in state.get("config_lines") or []:
        say(f"  {line}")
    say(f"report:  {run_dir.file('report.html')}")


def is_fleet_tune(path: Path) -> bool:
    """A directory a fleet tune wrote: spec.json naming a fleet, and hosts/ (no plan.json: a fleet run's)."""
    import json

    try:
        saved = json.loads((path / "spec.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(saved, dict) and bool(saved.get("fleet")) and (path / "hosts").is_dir() and not (path / "plan.json").exists()


def _tune_on_fleet(console: Any, say: Any, warn: Any, target: str | None, budget: str | None, seed: int | None, out: Path | None,
                   resume: Path | None, *, fleet: str | None, hosts: str | None, certs: Path | None, insecure: bool,
                   share_disk: bool, fleet_timeout: float) -> None:
    """`blocklab tune FILE --fleet ADDRESS`: each host its own tune, then every winner on every host (fleet/tune.py);
    `blocklab tune --resume DIR --fleet ADDRESS`: an interrupted one taken up again."""
    from .fleet import FleetError
    from .fleet.coordinator import FleetRequest
    from .fleet.security import certs_dir, check_address, load_security, quiet_logs
    from .fleet.tune import resume_tune, saved_fleet_tune, start_tune

    quiet_logs(False)
    try:
        if not fleet:
            if resume is not None and is_fleet_tune(resume):
                raise SpecError(f"--resume {resume}: this tune ran on a fleet; give its scheduler with --fleet ADDRESS")
            raise SpecError("--hosts, --certs, --insecure and --share-disk go with --fleet ADDRESS (a tune on a fleet)")
        if resume is not None and (target or budget or seed is not None or out):
            raise SpecError("--resume continues a fleet tune exactly as it started: give no FILE/RECIPE, --budget, --seed or --out")
        if resume is None and not target:
            raise SpecError("give an experiment FILE whose [knobs] are the space to search (or --resume DIR)")
        if resume is not None:
            saved_fleet_tune(resume)  # a directory that is not a fleet tune's: said before the fleet's options
        address = check_address("--fleet", fleet, insecure)
        request = FleetRequest(address, load_security("client", certs_dir(certs, insecure)), parse_hosts(hosts), share_disk, fleet_timeout)
        if resume is not None:
            state = resume_tune(resume, request, say=say, warn=warn)
        else:
            state = start_tune(target or "", budget=budget, seed=seed, request=request, say=say, out=out, warn=warn)
    except Interrupted as err:
        where = Path(getattr(err, "run_dir", None) or resume or "DIR")
        if (where / "spec.json").exists():
            console.print(f"{err}; continue with: blocklab tune --resume {where} --fleet {fleet} {trust_words(certs, insecure)}",
                          markup=False, highlight=False)
        else:
            console.print("interrupted before the tune started: nothing to resume", markup=False, highlight=False)
        sys.exit(EXIT_INTERRUPTED)
    except KeyboardInterrupt:  # while reaching the scheduler or choosing the hosts: nothing written yet
        console.print("interrupted before the tune started: nothing to resume" if resume is None
                      else f"interrupted; continue with: blocklab tune --resume {resume} --fleet {fleet} {trust_words(certs, insecure)}",
                      markup=False, highlight=False)
        sys.exit(EXIT_INTERRUPTED)
    except (SpecError, ResultsError) as err:
        fail(console, str(err), EXIT_BAD_INPUT)
    except FleetError as err:
        again = f"\ncontinue with: blocklab tune --resume {err.run_dir} --fleet {fleet} {trust_words(certs, insecure)}" if err.run_dir else ""
        fail(console, f"{err}{again}", EXIT_FAILED)
    except (EngineError, ResultsWriteError) as err:
        fail(console, str(err), EXIT_FAILED)
    for host, t in state["tunes"].items():
        say(f"{host}: {t.get('verdict')}")
    say(state["agreement"]["verdict"])
    say(f"report:  {Path(state['dir']) / 'report.html'} (each host's tune: {Path(state['dir']) / 'hosts'}/HOST/report.html)")
