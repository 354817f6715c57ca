"""Spark processes of their own for the Connect and cluster tests.

Every process is started with the pyspark distribution's own launchers
(``bin/spark-submit``, ``bin/spark-class``), in a new process group, its
output in a log file; readiness is polled with a bounded timeout, and a
process that dies or never gets ready fails the test with the end of its log.
:func:`stop` ends a process by its pid (SIGTERM, then SIGKILL) and then
whatever is left of its process group (the JVM's Python workers, a worker's
executors), so nothing outlives the test even when it fails.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
"""The pyspark distribution: ``bin/``, ``jars/``, ``sbin/``."""

LOG4J = Path(__file__).parent.parent / "faq" / "log4j2.properties"
"""The library's quiet JVM logging (warnings and errors)."""

SESSION_ENV = (
    "SPARK_CONNECT_MODE_ENABLED",
    "SPARK_REMOTE",
    "SPARK_LOCAL_REMOTE",
    "SPARK_API_MODE",
    "PYSPARK_GATEWAY_PORT",
    "PYSPARK_GATEWAY_SECRET",
    "PYSPARK_SUBMIT_ARGS",
)
"""Variables that tie a process to a session or JVM of this one; never inherited."""


class SparkProcessError(RuntimeError):
    """A Spark process died or did not get ready in time (the message holds its log)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int) -> bool:
    """True when something accepts connections on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def spark_env(**extra: str) -> dict[str, str]:
    """This process's environment for a Spark child: its own SPARK_HOME, Python workers
    running this interpreter, none of this process's session or gateway variables."""
    env = {k: v for k, v in os.environ.items() if k not in SESSION_ENV}
    env["SPARK_HOME"] = str(SPARK_HOME)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env.update(extra)
    return env


def launch(
    args: Sequence[str], log: Path, *, env: dict[str, str], cwd: Path
) -> subprocess.Popen[bytes]:
    """Start ``args`` in a new process group, stdout and stderr appended to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(
            list(args),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )


def log_tail(log: Path, lines: int = 60) -> str:
    """The last ``lines`` lines of ``log`` (or a note that there is none)."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(no log: {exc})"
    return "\n".join(text.splitlines()[-lines:])


def wait_until(
    ready: Callable[[], bool],
    procs: Sequence[tuple[str, subprocess.Popen[bytes], Path]],
    what: str,
    timeout: float,
) -> None:
    """Poll ``ready`` until it is True; SparkProcessError when one of ``procs`` (name,
    process, log) exits first or ``timeout`` seconds pass, with the end of every log."""
    deadline = time.monotonic() + timeout
    while True:
        dead = [(n, p) for n, p, _ in procs if p.poll() is not None]
        if dead:
            name, p = dead[0]
            problem = f"{name} exited with status {p.returncode} before {what}"
            break
        if ready():
            return
        if time.monotonic() > deadline:
            problem = f"{what}: not within {timeout:.0f} s"
            break
        time.sleep(0.25)
    logs = "\n".join(f"--- {name}: {log} (end) ---\n{log_tail(log)}" for name, _, log in procs)
    raise SparkProcessError(f"{problem}\n{logs}")


def stop(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """End ``proc`` by its pid (SIGTERM: the JVM runs its shutdown hooks; SIGKILL after
    ``timeout`` s), then SIGKILL whatever is left in its process group."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)
    # the group was created for this process alone (start_new_session): its Python
    # workers and, for a worker, its executors
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def group_alive(proc: subprocess.Popen[bytes]) -> bool:
    """True while any process of ``proc``'s process group is still running."""
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def java_options() -> str:
    """JVM options of every test process: the library's quiet logging."""
    return f"-Dlog4j2.configurationFile={LOG4J.as_uri()}"


class ConnectServer:
    """A Spark Connect server in its own JVM (``spark-submit --class SparkConnectServer``).

    Parameters
    ----------
    workdir : Path
        Its working directory and log folder (deliberately not this process's).
    master : str
        The server's Spark master.
    timeout : float
        Seconds to wait until its gRPC port accepts connections.
    """

    CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"

    def __init__(self, workdir: Path, master: str = "local[2]", timeout: float = 180.0) -> None:
        self.workdir = workdir
        self.log = workdir / "connect-server.log"
        self.port = free_port()
        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.adaptive.enabled": "false",
            "spark.sql.execution.arrow.pyspark.enabled": "true",
            "spark.pyspark.python": sys.executable,
        }
        args = [
            str(SPARK_HOME / "bin" / "spark-submit"),
            "--class",
            self.CLASS,
            "--name",
            "sparkfaq-test-connect",
            "--master",
            master,
            "--driver-memory",
            "1g",
            "--driver-java-options",
            java_options(),
        ]
        for k, v in conf.items():
            args += ["--conf", f"{k}={v}"]
        self.proc = launch(args, self.log, env=spark_env(), cwd=workdir)
        try:
            wait_until(
                lambda: port_open(self.port),
                [("Spark Connect server", self.proc, self.log)],
                f"the Spark Connect server accepted connections on port {self.port}",
                timeout,
            )
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        """The ``sc://`` address of the server."""
        return f"sc://127.0.0.1:{self.port}"

    def stop(self) -> None:
        """Stop the server and every process of its group."""
        stop(self.proc)


class StandaloneCluster:
    """A Spark standalone master and ``workers`` workers (``spark-class``), each in its own JVM.

    Parameters
    ----------
    workdir : Path
        Logs and the workers' work directories.
    cores, memory : int, str
        What each worker offers to executors.
    workers : int
        How many workers to start (each its own JVM, log and work directory).
    timeout : float
        Seconds to wait until every worker is registered with the master (ALIVE).
    env : dict, optional
        Extra environment variables of the master and the workers (the workers' executors
        and their Python workers inherit them), e.g. ``PYTHONPATH``.
    """

    MASTER = "org.apache.spark.deploy.master.Master"
    WORKER = "org.apache.spark.deploy.worker.Worker"

    def __init__(
        self,
        workdir: Path,
        cores: int = 2,
        memory: str = "2g",
        workers: int = 1,
        timeout: float = 180.0,
        env: dict[str, str] | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.workdir = workdir
        self.port, self.ui_port = free_port(), free_port()
        env = spark_env(
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=str(workdir),
            SPARK_DAEMON_JAVA_OPTS=java_options(),
            SPARK_WORKER_OPTS=java_options(),
            **(env or {}),
        )
        spark_class = str(SPARK_HOME / "bin" / "spark-class")
        self.master_log = workdir / "master.log"
        self.worker_logs = [workdir / f"worker-{i}.log" for i in range(workers)]
        self.master = launch(
            [spark_class, self.MASTER, "--host", "127.0.0.1", "--port", str(self.port),
             "--webui-port", str(self.ui_port)],
            self.master_log, env=env, cwd=workdir,
        )  # fmt: skip
        self.workers: list[subprocess.Popen[bytes]] = []
        procs = [("Spark master", self.master, self.master_log)]
        try:
            wait_until(lambda: port_open(self.port), procs, "the master listened", timeout)
            for i, log in enumerate(self.worker_logs):
                worker = launch(
                    [spark_class, self.WORKER, "--host", "127.0.0.1", "--cores", str(cores),
                     "--memory", memory, "--webui-port", str(free_port()),
                     "--work-dir", str(workdir / f"work-{i}"), self.url],
                    log, env=env, cwd=workdir,
                )  # fmt: skip
                self.workers.append(worker)
                procs.append((f"Spark worker {i}", worker, log))
            wait_until(
                lambda: self.alive_workers() >= workers,
                procs,
                f"{workers} worker(s) registered",
                timeout,
            )
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        """The ``spark://`` address of the master."""
        return f"spark://127.0.0.1:{self.port}"

    def alive_workers(self) -> int:
        """How many workers the master's status page lists as ALIVE (0 while it has none
        or does not answer)."""
        import json
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as r:
                status = json.load(r)
        except (OSError, ValueError):
            return 0
        return sum(w.get("state") == "ALIVE" for w in status.get("workers", []))

    def log_tails(self, lines: int = 40) -> str:
        """The end of every worker's log, each under its name."""
        return "\n".join(
            f"--- worker {i}: {log} (end) ---\n{log_tail(log, lines)}"
            for i, log in enumerate(self.worker_logs)
        )

    def stop(self) -> None:
        """Stop every worker (and its executors), then the master; every one is stopped
        even when stopping another fails (the first failure is raised afterwards)."""
        failure: Exception | None = None
        for proc in (*self.workers, self.master):
            try:
                stop(proc)
            except Exception as exc:  # the others must still be stopped
                failure = failure or exc
        if failure is not None:
            raise failure
