"""The status page of a running query, served beside its metrics (`--metrics-port`:
`http://127.0.0.1:PORT/` and `/metrics`): the plan tree with each operator's engine and
DB-op, the predicted cost vector, each stream's input and rate, each stage's batches,
clock and backlog, each query's results and the last instant its sinks committed. Plain
HTML rendered at each request (no script); it reloads itself every 2 s."""

from __future__ import annotations

import html
import time
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from federation.logical import Window
from federation.runtime.sinks import sink_label

STYLE = ("body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}"
         "table{border-collapse:collapse;margin:.5em 0 1.2em}"
         "td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}"
         "th{background:#f2f2f2}.spe{color:#a33}.db{color:#236}.leaf{color:#777}"
         ".tree{font-family:monospace}")


def plan_rows(plan) -> list[tuple[str, str, str, str]]:
    """(indent + id, engine, DB-op, operator) per operator, top down."""
    lg, out = plan.logical, []

    def rec(oid: str, depth: int) -> None:
        node = lg.nodes[oid]
        if oid != "root":
            d = None if isinstance(node, Window) else plan.db_op_of(oid)
            eng = "leaf" if isinstance(node, Window) else "SPE" if d is None else "DB"
            out.append(("\u00a0\u00a0" * depth + oid, eng, d.id if d else "", node.label()))
        for c in lg.children[oid]:
            rec(c, depth + (oid != "root"))

    rec("root", 0)
    return out


def render(m) -> str:
    """The page of the run whose metrics are `m` (metrics.RunMetrics)."""
    e = html.escape
    info, elapsed = m.info, max(time.monotonic() - m.started, 1e-9)
    parts = [(f"<!doctype html><html><head><meta charset='utf-8'>"
             f"<meta http-equiv='refresh' content='2'><title>fedq {e(info['query'])}</title>"
             f"<style>{STYLE}</style></head><body>"),
             f"<h1>fedq: {e(info['query'])} <small>{e(m.state)}</small></h1>",
             f"<p>placement <b>{e(info['placement'])}</b> · feed {e(info['feed'])} · "
             f"running {elapsed:,.0f} s" + (f" · predicted C_b {m.cost[0]:.3g}, C_u "
                                             f"{m.cost[1]:.3g}" if m.cost else "") + "</p>"]
    parts.append(_table("Plan", ["operator", "engine", "DB-op", "what"],
                        [(f"<span class=tree>{e(i)}</span>", (f"<span class={g.lower()}>{g}"
                          "</span>"), e(d), e(w)) for i, g, d, w in plan_rows(m.plan)]))
    rows = []
    for name, r in sorted(m.inputs().items()):
        rows.append((e(name), f"{r.rows_in:,}", f"{r.rows_in / elapsed:,.0f}/s",
                     f"{sum(r.dead.values()):,}", e(str(r.last_ts))))
    parts.append(_table("Streams", ["stream", "rows in", "rate", "dead letters", "clock"], rows))
    last, batches, _, _ = m.snapshot()
    parts.append(_table("Stages", ["stage", "batches", "last batch s", "clock", "backlog s",
                                   "rho"],
                        [(str(s), str(batches.get(s, 0)), f"{b.wall_s:.2f}", e(str(b.clock)),
                          "" if b.backlog_s is None else str(b.backlog_s),
                          "" if b.rho_so_far is None else f"{b.rho_so_far:.2f}")
                         for s, b in sorted(last.items())]))
    parts.append(_table("Queries", ["query", "result rows", "instants", "last instant",
                                    "sinks"],
                        [(e(q), f"{c.rows:,}", f"{c.instants:,}", e(str(c.last_tau)),
                          e(", ".join(sink_label(s) for s in c.sinks) or "the run's result"))
                         for q, c in sorted(m.queries().items())]))
    if m.segments:  # an adaptive run: its decisions, the running placement last
        parts.append(_table("Adaptive segments", ["#", "placement", "since", "taken over by",
                                                  "reason"],
                            [(str(k + 1), e(s["placement"]), e(s["since"]), e(s["strategy"]),
                              e(s["reason"])) for k, s in enumerate(m.segments)]))
    parts.append("<p><a href='/metrics'>metrics</a></p></body></html>")
    return "".join(parts)


def _table(title: str, head: list[str], rows: list[tuple]) -> str:
    th = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<h2>{title}</h2><table><tr>{th}</tr>{body}</table>"


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args) -> None:  # no line per request on stderr
        pass


def serve(m, metrics_app, port: int, addr: str = "127.0.0.1"):
    """A server of `/` (the page) and `/metrics` (`metrics_app`) in a daemon thread."""
    import threading

    def app(environ, start_response):
        if environ.get("PATH_INFO", "/") in ("/", "/status"):
            body = render(m).encode()
            start_response("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                      ("Content-Length", str(len(body)))])
            return [body]
        return metrics_app(environ, start_response)

    server = make_server(addr, port, app, _Server, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, name="fedq-metrics", daemon=True).start()
    return server
