"""Load test of the judging loop (submit + next) against the server on PostgreSQL, in the three
workloads of the speed targets: one annotator alone, 32 annotators at human pace offering 50
judgments/s in all, and the same 32 with no think time (the server saturated).

Usage: python bench/bench_judging_load.py [--annotators 32] [--duration 30]
       [--single-duration 10] [--rates 50] [--database NAME] [--queries 5000]
       [--docs-per-query 20] [--server granian|gunicorn] [--workers N] [--threads N]
       [--worker-class gthread|sync] [--reuse] [--output bench/results/judging.md]

What it does, all on 127.0.0.1 and bounded in count and time:

1. creates a fresh PostgreSQL database (`--database`, dropped first), migrates it and builds,
   through the project's services, a project with `queries x docs-per-query` pool items (100,000
   by default) and one user per simulated annotator;
2. serves the app as the image does: granian started by the image's entry point
   (docker/entrypoint.sh), DEBUG=0, the production settings, static files collected; or, with
   `--server gunicorn`, gunicorn's threaded workers with keep-alive as deployed before, to
   compare the two servers on the same data;
3. three workloads. Each annotator logs in through the login form and opens the judging page,
   then answers item after item exactly as htmx does, on one kept-alive connection: one POST
   that stores the grade and returns the next item's panel ("submit + next"). One thread drives
   every connection (the client shares the machine's cores with the server, so it does as
   little as it can).
   - one annotator alone, answering as soon as each panel arrives: the latency of one request
     on an idle server (target p95 <= 20 ms);
   - `--annotators` at human pace, once per rate of `--rates` (default 50/s in all): an open
     loop. Each person's answers fall due at the times of a Poisson process (an exponentially
     distributed think time of mean annotators / rate), whatever the server does; an answer
     due before its panel has arrived is sent when the panel arrives, and its latency counts
     from when it fell due, so that a slow server can neither lower the offered rate nor hide
     its queue (target p95 <= 50 ms, 0 errors);
   - the same annotators with no think time, a closed loop: the server saturated, measuring
     throughput (target >= 150 judgments/s on 2 cores; its latency is the number of
     annotators over the throughput, whatever the server does);
4. afterwards checks in SQL that the stored judgments equal the acknowledged submissions, that
   no unit has more holders than judges and that no single-judged item has two judges, and
   reports the CPU time per answer of the web server, PostgreSQL and the client.
"""

from __future__ import annotations

import argparse
import datetime
import heapq
import http.client
import os
import platform
import random
import re
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.synthetic import write_project_files

REPO = Path(__file__).resolve().parents[1]
SLUG = "load"
PASSWORD = "load-test-password-1"
ITEM = re.compile(rb'data-item="(\d+)"')
KEY = re.compile(rb'name="key" value="([0-9a-f-]{36})"')
TOKEN = re.compile(rb'name="csrfmiddlewaretoken" value="([^"]+)"')
CONTENT_LENGTH = re.compile(rb"\r\nContent-Length: *(\d+)", re.IGNORECASE)
MAX_SUBMISSIONS = 200_000  # a hard bound on top of the duration


# --- set-up (runs in a child process with Django configured) -------------------------------


def setup_data(queries: int, per_query: int, annotators: int) -> None:
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.contrib.auth.hashers import make_password
    from django.contrib.auth.models import User

    from annotation.models import Membership, Role
    from annotation.services import corpus_import, project_create, protocol_publish, queries_import
    from judging.services import pool_open
    from pooling.services import run_import

    tmp = Path(tempfile.mkdtemp())
    write_project_files(tmp, queries, per_query, words_per_doc=70)
    project = project_create(slug=SLUG, name="Load test")
    protocol_publish(project=project, text="Grade 3: answers it. Grade 0: unrelated.")
    corpus_import(project=project, path=tmp / "corpus.tsv")
    queries_import(project=project, path=tmp / "queries.tsv")
    run = run_import(project=project, path=tmp / "system.run", name="system")
    pool_open(project=project, runs=[run], depth=per_query, seed=1)
    password = make_password(PASSWORD)  # hashed once: 33 slow hashes would only cost time
    users = User.objects.bulk_create(
        [User(username=name, password=password) for name in usernames(annotators)]
    )
    Membership.objects.bulk_create(
        [Membership(project=project, user=u, role=Role.ANNOTATOR) for u in users]
    )


def usernames(annotators: int) -> list[str]:
    return ["solo"] + [f"judge{i:03d}" for i in range(annotators)]


# --- the simulated annotators --------------------------------------------------------------


@dataclass
class Annotator:
    """One simulated annotator: logs in with an ordinary HTTP client, then judges through a
    raw keep-alive socket driven by `judge_all` (the load client shares the machine's two
    cores with the server, so it does as little as a client can)."""

    port: int
    username: str
    latencies: list[float] = field(default_factory=list)
    acknowledged: int = 0
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        self.cookies: dict[str, str] = {}
        self.page = b""
        self.sock: socket.socket | None = None
        self.inbox = bytearray()
        self.sent_at = 0.0
        self.due = 0.0  # open loop: when the next answer falls due
        self.closing = False
        self.n = 0

    def call(self, method: str, path: str, body: str = "", headers: dict | None = None):
        sent = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        sent.update(headers or {})
        self.conn.request(method, path, body=body or None, headers=sent)
        response = self.conn.getresponse()
        data = response.read()
        for cookie in response.headers.get_all("Set-Cookie") or []:
            self.set_cookie(cookie)
        return response.status, data

    def set_cookie(self, header: str) -> None:
        name, _, rest = header.partition("=")
        self.cookies[name.strip()] = rest.split(";", 1)[0]

    def log_in(self) -> None:
        _, page = self.call("GET", "/accounts/login/")
        token = TOKEN.search(page)
        assert token, "no CSRF token on the login page"
        form = {"username": self.username, "password": PASSWORD}
        form["csrfmiddlewaretoken"] = token.group(1).decode()
        status, _ = self.call("POST", "/accounts/login/", urllib.parse.urlencode(form), FORM)
        assert status == 302 and "sessionid" in self.cookies, f"login failed: {status}"
        _, self.page = self.call("GET", f"/p/{SLUG}/judge/")  # reads only
        if b'id="claim-form"' in self.page:  # holding no query: claim one, as the page does
            htmx = {"HX-Request": "true", "X-CSRFToken": self.cookies["csrftoken"]}
            _, self.page = self.call("POST", f"/p/{SLUG}/judge/claim/", headers=htmx)
        self.conn.close()

    # --- the judging loop: what htmx sends when a grade key is pressed ---------------------

    def connect(self) -> None:
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)

    def send_answer(self, due: float | None = None) -> bool:
        """Answer the item on screen; False when there is nothing left to judge. The latency
        counts from `due` (when the answer fell due) if given, else from now."""
        item, key = ITEM.search(self.page), KEY.search(self.page)
        if item is None or key is None or self.sock is None:
            return False
        body = b"kind=grade&grade=%d&seconds=1.5&key=%s" % (self.n % 4, key.group(1))
        cookies = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        head = (
            f"POST /p/{SLUG}/judge/{item.group(1).decode()}/ HTTP/1.1\r\n"
            f"Host: 127.0.0.1:{self.port}\r\nCookie: {cookies}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            f"HX-Request: true\r\nHX-Target: judge-panel\r\n"
            f"HX-Current-URL: http://127.0.0.1:{self.port}/p/{SLUG}/judge/\r\n"
            f"X-CSRFToken: {self.cookies['csrftoken']}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        self.inbox.clear()
        self.sent_at = time.perf_counter() if due is None else due
        self.sock.sendall(head.encode() + body)  # a few hundred bytes: the buffer takes them
        self.n += 1
        return True

    def receive(self) -> bool:
        """Read what has arrived; True once the whole response is in (and handled)."""
        assert self.sock is not None
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.inbox += chunk
        end = self.inbox.find(b"\r\n\r\n")
        if end < 0:
            return False
        head = bytes(self.inbox[:end])
        length = CONTENT_LENGTH.search(head)
        if length is None:
            raise ConnectionError("a response without Content-Length")
        if len(self.inbox) < end + 4 + int(length.group(1)):
            return False
        self.latencies.append(time.perf_counter() - self.sent_at)
        status = int(head[9:12])
        if b"Set-Cookie" in head:  # rare: the session and CSRF cookies do not change
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"set-cookie:"):
                    self.set_cookie(line[11:].decode().strip())
        self.page = bytes(self.inbox[end + 4 :])
        if status == 200:
            self.acknowledged += 1
        else:
            self.errors.append(f"HTTP {status}")
        self.closing = b"Connection: close" in head  # a sync worker: reconnect, as browsers do
        return True

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def judge_all(
    clients: list[Annotator], deadline: float, budget: Budget, think: float = 0.0, seed: int = 7
) -> None:
    """Drive every annotator from one thread (times are `time.perf_counter()`).

    With no think time each sends its next answer as soon as the previous response is in (a
    closed loop). With ``think`` > 0 it is an open loop: each annotator's answers fall due at
    the times of a Poisson process of mean gap ``think`` (``len(clients) / think`` answers per
    second offered in all); one that falls due while the previous is still in flight is sent
    when its panel arrives, and its latency counts from when it fell due."""
    selector = selectors.DefaultSelector()
    rng = random.Random(seed)
    waiting: list[tuple[float, int, Annotator]] = []  # (when, tie-breaker, annotator)

    def send(client: Annotator, due: float | None) -> None:
        if time.perf_counter() < deadline and budget.take() and client.send_answer(due):
            selector.register(client.sock, selectors.EVENT_READ, client)  # type: ignore[arg-type]
        else:
            client.close()

    def later(client: Annotator) -> None:
        if think <= 0:
            send(client, None)
            return
        client.due += rng.expovariate(1 / think)
        if client.due >= deadline:  # the phase is over before this answer falls due
            client.close()
        elif client.due <= time.perf_counter():  # fell due while the last was in flight
            send(client, client.due)
        else:
            heapq.heappush(waiting, (client.due, id(client), client))

    start = time.perf_counter()
    for client in clients:
        client.connect()
        client.due = start
        later(client)
    while selector.get_map() or waiting:
        now = time.perf_counter()
        while waiting and waiting[0][0] <= now:
            client = heapq.heappop(waiting)[2]
            send(client, client.due)
        if not selector.get_map():
            if waiting:  # everyone is thinking
                time.sleep(max(0.0, waiting[0][0] - now))
            continue
        timeout = max(0.0, waiting[0][0] - now) if waiting else 30.0
        for event, _ in selector.select(timeout=timeout):
            client = event.data
            try:
                if not client.receive():
                    continue
            except OSError as error:
                client.errors.append(repr(error))
                selector.unregister(event.fileobj)
                client.close()
                continue
            selector.unregister(event.fileobj)
            if client.closing:
                client.close()
                client.connect()
            later(client)


FORM = {"Content-Type": "application/x-www-form-urlencoded"}
CPU_PARTS = ("client", "app", "postgres", "other")


class Budget:
    """A shared cap on the number of submissions."""

    def __init__(self, limit: int) -> None:
        self.left, self.lock = limit, threading.Lock()

    def take(self) -> bool:
        with self.lock:
            self.left -= 1
            return self.left >= 0


@dataclass
class Phase:
    annotators: int
    seconds: float
    latencies: list[float]
    acknowledged: int
    errors: list[str]
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds by part, whole phase
    offered: float | None = None  # answers per second offered (None: no think time)

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies) or [float("nan")]
        return 1000 * ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]

    @property
    def throughput(self) -> float:
        return self.acknowledged / self.seconds


TICK = os.sysconf("SC_CLK_TCK")


def cpu_by_part(server_pid: int) -> dict[str, float]:
    """CPU seconds used so far by the load client, the web server, PostgreSQL (all its processes:
    a backend's time moves to the postmaster when it exits, as Django's connections do every
    `CONN_MAX_AGE` seconds, so backends and background cannot be told apart over a phase) and
    everything else on the machine (other people's work on a shared machine, their PostgreSQL
    backends included, shows up under PostgreSQL or "other")."""
    parts = {"client": sum(os.times()[:2]), "app": 0.0, "postgres": 0.0}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        pid, ppid = int(stat.parent.name), int(fields[1])
        # own time, plus that of children already reaped (PostgreSQL backends come and go)
        used = sum(int(f) for f in fields[11:15]) / TICK
        if pid == server_pid or ppid == server_pid:
            parts["app"] += used
        elif name == "postgres":
            parts["postgres"] += used
    busy = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    total = (sum(int(x) for x in busy[:8]) - int(busy[3]) - int(busy[4])) / TICK
    parts["other"] = total - sum(parts.values())
    return parts


def run_phase(
    clients: list[Annotator],
    duration: float,
    server_pid: int,
    rate: float | None = None,
) -> Phase:
    """One measured phase. ``rate`` (answers per second offered by all the annotators together)
    gives each a think time of mean ``len(clients) / rate``; None means no think time."""
    for client in clients:
        if not client.cookies:
            client.log_in()
        client.latencies, client.acknowledged, client.errors = [], 0, []
    budget = Budget(MAX_SUBMISSIONS)
    before = cpu_by_part(server_pid)
    started = time.perf_counter()
    think = len(clients) / rate if rate else 0.0
    judge_all(clients, started + duration, budget, think=think)
    elapsed = time.perf_counter() - started
    after = cpu_by_part(server_pid)
    return Phase(
        cpu={part: after[part] - before[part] for part in after},
        annotators=len(clients),
        seconds=elapsed,
        latencies=[x for c in clients for x in c.latencies],
        acknowledged=sum(c.acknowledged for c in clients),
        errors=[e for c in clients for e in c.errors],
        offered=rate,
    )


# --- the server and the checks -------------------------------------------------------------


def database_env(args: argparse.Namespace, static_root: str) -> dict[str, str]:
    return dict(
        os.environ,
        DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/{args.database}",
        SECRET_KEY="load-test-only",
        DEBUG="0",
        ALLOWED_HOSTS="127.0.0.1",
        STATIC_ROOT=static_root,
        DJANGO_SETTINGS_MODULE="assay.settings.base",
        LOG_LEVEL="WARNING",
    )


def sql(args: argparse.Namespace, query: str, dbname: str | None = None) -> list[tuple]:
    import psycopg

    with psycopg.connect(
        host="127.0.0.1", user="postgres", dbname=dbname or args.database, autocommit=True
    ) as conn:
        cursor = conn.execute(query)
        return cursor.fetchall() if cursor.description else []


def prepare(args: argparse.Namespace, env: dict[str, str]) -> None:
    manage = [sys.executable, "manage.py"]
    if not args.reuse:
        sql(args, f'DROP DATABASE IF EXISTS "{args.database}"', dbname="postgres")
        sql(args, f'CREATE DATABASE "{args.database}"', dbname="postgres")
        subprocess.run([*manage, "migrate", "-v0"], cwd=REPO, env=env, check=True)
        start = time.perf_counter()
        setup = [sys.executable, __file__, "--setup", "--queries", str(args.queries)]
        setup += ["--docs-per-query", str(args.docs_per_query)]
        setup += ["--annotators", str(args.annotators)]
        subprocess.run(setup, cwd=REPO, env=env, check=True)
        print(f"set-up: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    else:  # start again from no judgments at all, on an up-to-date schema
        subprocess.run([*manage, "migrate", "-v0"], cwd=REPO, env=env, check=True)
        sql(args, "TRUNCATE judging_judgment, judging_claim, django_session")
        sql(args, "UPDATE judging_workunit SET claims_taken = 0")
    sql(args, "VACUUM ANALYZE")
    # Write out the set-up's pages now, so that the checkpointer's work on the bulk load is not
    # counted against the judging loop.
    sql(args, "CHECKPOINT")
    subprocess.run([*manage, "collectstatic", "--noinput", "-v0"], cwd=REPO, env=env, check=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# gunicorn as it was deployed before granian replaced it, for the comparison (`--server
# gunicorn`): threaded workers that keep each annotator's connection open.
GUNICORN = {"workers": 3, "worker_class": "gthread", "threads": 4, "keepalive": 75}


def server_config(args: argparse.Namespace) -> dict[str, Any]:
    """The server's settings: the deployment's (docker/entrypoint.sh) or gunicorn's, with the
    command line's overrides."""
    if args.server == "granian":
        return {"workers": args.workers or 2, "threads": args.threads or 4}
    worker_class = args.worker_class or GUNICORN["worker_class"]
    return {
        "workers": args.workers or GUNICORN["workers"],
        "worker_class": worker_class,
        # gunicorn turns a sync worker with threads into a threaded one: keep sync plain
        "threads": 1 if worker_class == "sync" else args.threads or GUNICORN["threads"],
        "keepalive": GUNICORN["keepalive"],
    }


def server_command(args: argparse.Namespace, env: dict[str, str]) -> list[str]:
    config = server_config(args)
    if args.server == "granian":
        # The image's own entry point, so that what is measured is what is deployed; `serve`
        # skips the migrations (done already) and HOST keeps it on the loopback interface.
        env.update(
            HOST="127.0.0.1",
            PORT=str(args.port),
            WEB_CONCURRENCY=str(config["workers"]),
            WEB_THREADS=str(config["threads"]),
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        )
        return ["sh", str(REPO / "docker" / "entrypoint.sh"), "serve", "--no-access-log",
                "--log-level", "warning"]  # fmt: skip
    return [
        sys.executable, "-m", "gunicorn", "assay.wsgi:application",
        "--bind", f"127.0.0.1:{args.port}", "--backlog", "256", "--log-level", "warning",
        "--workers", str(config["workers"]), "--worker-class", config["worker_class"],
        "--threads", str(config["threads"]), "--keep-alive", str(config["keepalive"]),
    ]  # fmt: skip


def serve(args: argparse.Namespace, env: dict[str, str]) -> subprocess.Popen:
    server = subprocess.Popen(server_command(args, env), cwd=REPO, env=env)
    for _ in range(100):
        if server.poll() is not None:
            sys.exit(f"{args.server} stopped at start-up (is the port free?)")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    sys.exit(f"{args.server} did not come up")


def checks(args: argparse.Namespace, acknowledged: int) -> dict[str, int]:
    stored = sql(args, "SELECT count(*) FROM judging_judgment")[0][0]
    over = sql(
        args,
        """SELECT count(*) FROM judging_workunit u WHERE u.judges_needed < (
               SELECT count(*) FROM judging_claim c
               WHERE c.unit_id = u.id AND c.state IN ('active', 'assigned', 'done'))""",
    )[0][0]
    counter_off = sql(
        args,
        """SELECT count(*) FROM judging_workunit u WHERE u.claims_taken <> (
               SELECT count(*) FROM judging_claim c
               WHERE c.unit_id = u.id AND c.state IN ('active', 'assigned', 'done'))""",
    )[0][0]
    twice = sql(
        args,
        """SELECT count(*) FROM (
               SELECT j.pair_id FROM judging_judgment j
               JOIN judging_workitem w ON w.pair_id = j.pair_id
               JOIN judging_workunit u ON u.id = w.unit_id
               WHERE u.judges_needed = 1
               GROUP BY j.pair_id HAVING count(DISTINCT j.user_id) > 1) AS t""",
    )[0][0]
    keys = sql(args, "SELECT count(DISTINCT idempotency_key) FROM judging_judgment")[0][0]
    items = sql(args, "SELECT count(*) FROM pooling_poolitem")[0][0]
    return {
        "pool items": items,
        "acknowledged submissions": acknowledged,
        "stored judgments": stored,
        "distinct idempotency keys": keys,
        "units with more holders than judges needed": over,
        "units whose claims_taken disagrees with their claims": counter_off,
        "single-judged items judged by two people": twice,
    }


def machine() -> str:
    model = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem = next(
        int(line.split()[1]) / 1024**2
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal")
    )
    pg = sql_version()
    return (
        f"{model}, {os.cpu_count()} logical cores, {mem:.0f} GB RAM; Python "
        f"{platform.python_version()}; {pg}; client and server on the same machine"
    )


def sql_version() -> str:
    import psycopg

    with psycopg.connect(host="127.0.0.1", user="postgres", dbname="postgres") as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return f"PostgreSQL {row[0].split()[0]}" if row else "PostgreSQL"


def server_line(args: argparse.Namespace, config: dict[str, Any]) -> str:
    if args.server == "granian":
        return (
            f"granian {config['workers']} workers x {config['threads']} threads "
            "(docker/entrypoint.sh, as deployed)"
        )
    threads = f" x {config['threads']} threads" if config["worker_class"] == "gthread" else ""
    return (
        f"gunicorn {config['workers']} {config['worker_class']} workers{threads}, "
        f"keep-alive {config['keepalive']} s (the earlier deployment)"
    )


def report(
    args: argparse.Namespace,
    solo: Phase,
    crowd: Phase,
    paced: list[Phase],
    verdict: dict[str, int],
) -> str:
    config = server_config(args)

    def pace(p: Phase) -> str:
        if p.offered is None:
            return "none"
        return f"{1000 * p.annotators / p.offered:.0f} ms, open loop ({p.offered:.0f}/s offered)"

    def row(p: Phase) -> str:
        return (
            f"| {p.annotators} | {pace(p)} | {p.seconds:.1f} | {len(p.latencies)} | "
            f"{p.percentile(50):.1f} | "
            f"{p.percentile(95):.1f} | {p.percentile(99):.1f} | "
            f"{1000 * statistics.fmean(p.latencies or [float('nan')]):.1f} | "
            f"{p.throughput:.0f} | {len(p.errors)} |"
        )

    lines = [
        f"Run on {datetime.date.today().isoformat()}: {machine()}.",
        server_line(args, config) + ", DEBUG=0, `CONN_MAX_AGE` 60; "
        f"{verdict['pool items']:,} pool items ({args.queries:,} queries x "
        f"{args.docs_per_query} documents); clients: one thread driving one keep-alive "
        "HTTP/1.1 connection per annotator (reopened when a sync worker closes it), "
        "no think time unless the table gives one (exponentially distributed, that mean; "
        "with a think time the latency counts from when an answer fell due).",
        "",
        "| annotators | think time | seconds | submissions | p50 ms | p95 ms | p99 ms | mean ms | "
        "judgments/s | errors |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        row(solo),
        *[row(p) for p in paced],
        row(crowd),
        "",
        "CPU time per acknowledged submission, by part (ms):",
        "",
        "| annotators | think time | load client | web server (Django) | PostgreSQL | "
        "other processes |",
        "|---:|---|---:|---:|---:|---:|",
        *[
            f"| {p.annotators} | {pace(p)} | "
            + " | ".join(f"{1000 * p.cpu[k] / max(p.acknowledged, 1):.1f}" for k in CPU_PARTS)
            + " |"
            for p in (solo, *paced, crowd)
        ],
        "",
        "| check after the run | value |",
        "|---|---:|",
        *[f"| {name} | {value:,} |" for name, value in verdict.items()],
        "",
        *targets(solo, paced, crowd, verdict),
    ]
    return "\n".join(lines) + "\n"


def targets(solo: Phase, paced: list[Phase], crowd: Phase, verdict: dict[str, int]) -> list[str]:
    """The speed targets (docs/benchmarks.md) against this run."""

    def met(ok: bool) -> str:
        return "met" if ok else "**missed**"

    stored = verdict["stored judgments"] == verdict["acknowledged submissions"]
    web = 1000 * crowd.cpu["app"] / max(crowd.acknowledged, 1)
    lines = ["| target | measured | |", "|---|---:|---|"]
    for p in paced:
        ok = p.percentile(95) <= 50 and not p.errors and stored
        lines.append(
            f"| {p.annotators} annotators offering {p.offered:.0f}/s: p95 <= 50 ms, 0 errors, "
            f"stored = acknowledged | p95 {p.percentile(95):.1f} ms, {p.throughput:.0f}/s "
            f"served, {len(p.errors)} errors | {met(ok)} |"
        )
    lines += [
        f"| 1 annotator alone: p95 <= 20 ms | p95 {solo.percentile(95):.1f} ms | "
        f"{met(solo.percentile(95) <= 20)} |",
        f"| saturated ({crowd.annotators} annotators, no think time): >= 150 judgments/s | "
        f"{crowd.throughput:.0f}/s | {met(crowd.throughput >= 150)} |",
        f"| web CPU per answer (saturated) | {web:.1f} ms | reported |",
    ]
    return lines


def _rates(text: str) -> list[float]:
    rates = [float(part) for part in text.split(",") if part.strip()]
    if any(rate <= 0 for rate in rates):
        raise argparse.ArgumentTypeError("rates are answers per second, above 0")
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Load test of the judging loop (submit + next) on PostgreSQL"
    )
    parser.add_argument("--annotators", type=int, default=32)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--single-duration", type=float, default=10.0)
    parser.add_argument(
        "--server", choices=["granian", "gunicorn"], default="granian",
        help="granian as deployed (default), or gunicorn as deployed before, to compare",
    )  # fmt: skip
    parser.add_argument("--workers", type=int, help="default: the deployment's")
    parser.add_argument("--worker-class", choices=["sync", "gthread"], help="gunicorn only")
    parser.add_argument("--threads", type=int, help="per worker (gunicorn: with gthread)")
    parser.add_argument("--queries", type=int, default=5000)
    parser.add_argument("--docs-per-query", type=int, default=20)
    parser.add_argument("--port", type=int, default=0, help="default: a free one")
    parser.add_argument("--database", default="assay_bench_judging")
    parser.add_argument("--reuse", action="store_true", help="keep the data of the last run")
    parser.add_argument("--output", type=Path)
    parser.add_argument(
        "--rates", type=_rates, default=[50.0],
        help="the annotators at human pace, offering these answers/s in all (comma-separated; "
        "default 50, the target's), one open-loop phase each before the saturated one",
    )  # fmt: skip
    parser.add_argument("--setup", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.setup:
        setup_data(args.queries, args.docs_per_query, args.annotators)
        return
    env = database_env(args, tempfile.mkdtemp())
    args.port = args.port or free_port()
    prepare(args, env)
    server = serve(args, env)
    try:
        people = [Annotator(args.port, name) for name in usernames(args.annotators)]
        solo = run_phase(people[:1], args.single_duration, server.pid)
        paced = [run_phase(people[1:], args.duration, server.pid, rate=rate) for rate in args.rates]
        crowd = run_phase(people[1:], args.duration, server.pid)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    acknowledged = sum(p.acknowledged for p in (solo, *paced, crowd))
    verdict = checks(args, acknowledged)
    text = report(args, solo, crowd, paced, verdict)
    print(text)
    for error in [e for p in (solo, *paced, crowd) for e in p.errors][:10]:
        print("error:", error, file=sys.stderr)
    if args.output:
        args.output.write_text(text)


if __name__ == "__main__":
    main()
