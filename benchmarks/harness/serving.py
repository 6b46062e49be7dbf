"""`spinfc serve DIR` as a user starts it (default settings; the device, host and port given, plus any `args`), in
a child process whose log is kept: started, waited for until /readyz answers 200 (or the process ends), stopped
with SIGINT. `root` is the checkout whose `spinfc` serves (default: this one), so an A/B study serves two
checkouts' `spinfc serve` side by side with the same client. A model too large to write as a snapshot (or built in
memory in some scheme) is made in the server's process by a `loader` (serve_app.py): the same settings, app and
uvicorn as `spinfc serve`, only the weights come from the study."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import httpx

ROOT = Path(__file__).resolve().parents[2]
CLI = "import sys; from spinfc.cli import main; sys.exit(main())"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_for(root: Path = ROOT) -> dict:
    """This environment with `root` first on PYTHONPATH: its `spinfc` (and `benchmarks`) are the ones imported;
    this checkout after it, so a tree holding only `spinfc/` (an older version's) still finds the harness."""
    paths = [str(root)] + ([str(ROOT)] if Path(root).resolve() != ROOT else []) + [os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def spinfc_command(*args: str, root: Path = ROOT, check: bool = True) -> subprocess.CompletedProcess:
    """`spinfc ARGS...` of the checkout at `root` (`quantize`, `score`, ...), run to its end, output captured."""
    done = subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True, env=env_for(root),
                          cwd=root)
    if check and done.returncode != 0:
        raise RuntimeError(f"spinfc {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return done


@attrs.define
class Server:
    directory: Path | str  # the model: a snapshot folder or a name `spinfc serve` resolves
    device: str
    log_path: Path
    args: tuple[str, ...] = ()  # further `spinfc serve` flags (a study that measures a setting)
    root: Path = ROOT  # the checkout whose spinfc serves
    loader: tuple[str, dict] | None = None  # ("module:function", its kwargs): serve_app.py makes the model
    port: int = attrs.field(factory=free_port)
    process: subprocess.Popen | None = None
    started: float = 0.0
    ready_after: float | None = None  # seconds from start to /readyz 200

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        serve = [sys.executable, "-c", CLI, "serve"] if self.loader is None else \
            [sys.executable, "-m", "benchmarks.harness.serve_app", self.loader[0], json.dumps(self.loader[1])]
        command = [*serve, str(self.directory), "--device", self.device, "--host", "127.0.0.1", "--port",
                   str(self.port), *self.args]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("w")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env_for(self.root),
                                        cwd=self.root)
        self.started = time.monotonic()
        return self

    def wait_ready(self, timeout: float) -> bool:
        """True once /readyz answers 200; False when the process ended, its model failed to load (the server stays
        up to say so), or `timeout` seconds passed."""
        while time.monotonic() - self.started < timeout:
            if self.process.poll() is not None or "the model could not be loaded" in self.log():
                return False
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    self.ready_after = time.monotonic() - self.started
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def tracebacks(self) -> list[str]:
        """The log's tracebacks, each from its first line to the exception's line."""
        lines, found = self.log().splitlines(), []
        for i, line in enumerate(lines):
            if line.startswith("Traceback"):
                end = next((j for j in range(i + 1, len(lines)) if lines[j] and not lines[j].startswith(" ")), i)
                found.append("\n".join(lines[i:end + 1])[-1500:])
        return found


@contextlib.contextmanager
def served(directory: Path | str, device: str, log_path: Path, *, args: tuple[str, ...] = (), root: Path = ROOT,
           loader: tuple[str, dict] | None = None, timeout: float = 900) -> Iterator[Server]:
    """A started server, ready (or RuntimeError with its log's tail), stopped on leaving."""
    server = Server(directory, device, log_path, args=tuple(args), root=root, loader=loader).start()
    try:
        if not server.wait_ready(timeout):
            raise RuntimeError(f"`spinfc serve {directory}` was not ready after {timeout:.0f} s:\n"
                               f"{server.log()[-3000:]}")
        yield server
    finally:
        server.stop()
