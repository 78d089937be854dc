"""``python -m specbound``: the ``specbound`` command line (:mod:`specbound.cli`).

Ctrl-C from the first instant: :func:`run` installs a SIGINT handler (one line
``specbound COMMAND: interrupted`` on standard error, exit status 130) before anything else
is imported; :func:`specbound.cli.main` then takes over with its own handling.
"""

import os
import signal
import sys

_COMMAND_WORDS = ("models", "generate", "detect", "log", "check-sampler")


def _interrupted_at_start(signum, frame):  # pragma: no cover - runs in a child process
    words = [w for w in sys.argv[1:] if w in _COMMAND_WORDS]
    prog = f"specbound {words[0]}" if words else "specbound"
    os.write(2, f"{prog}: interrupted\n".encode())
    os._exit(130)


def run() -> int:
    """The program's entry point: early SIGINT handler, then :func:`specbound.cli.main`."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, _interrupted_at_start)
    from specbound.cli import main

    return main()


if __name__ == "__main__":
    sys.exit(run())
