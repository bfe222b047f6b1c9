"""The league on one web page: what ``GET /league`` renders (docs/registry.md).

Plain server-rendered HTML with the Elo-drift chart as inline SVG: no script, no
build step, nothing fetched from anywhere else (the page must work on a registry
that sees nothing but its own clients, and the test's browser reaches only
127.0.0.1).  Everything here is a pure function of data the routes already read —
the ``GET /ratings`` table, the checkpoint records, the match log — so the page
shows exactly what the API serves, and this module needs no HTTP to be tested.

Every value that reaches the HTML goes through :func:`html.escape`, ids included
(the id rule already keeps ``<`` and ``"`` out of them; the page does not rely on it).
"""

from __future__ import annotations

import datetime as _dt
import html
from collections.abc import Sequence
from typing import Any

from brawlkit.league.ratings import bt_text, elo
from brawlkit.league.records import TIME_WINDOW, MatchRecord, cpu_id
from brawlkit.league.role_specs import settled_roles
from brawlkit.wire.cpu_level import CPU_LEVELS

#: one colour per role (and kind), the same in the table's badges and the chart: a
#: trained role's from its declaration (brawlkit/league/role_specs.py)
ROLE_COLOURS = {
    **{s.name: s.colour for s in settled_roles()},
    "cpu": "#7f7f7f", "baseline": "#17becf", "human": "#9467bd", "?": "#8c564b",
}
#: a colour per CPU level: a ramp from light orange to dark brown, so the ladder reads
#: in order on the chart (no level shares its hue with a role: roles are blue, red,
#: green, cyan and purple)
CPU_COLOURS = dict(zip((cpu_id(lv) for lv in CPU_LEVELS),
                       ("#fec44f", "#fe9929", "#ec7014", "#cc4c02", "#a63603", "#7f2704",
                        "#5a1d03", "#2e0f02"), strict=True))
#: the chart shows at most this many members (those with the most games), each line at
#: most this many points: a page of 100,000 matches stays a few hundred KB
CHART_MEMBERS = 40
CHART_POINTS = 300
RECENT_MATCHES = 25
W, H, PAD_L, PAD_R, PAD_T, PAD_B = 900, 320, 56, 16, 14, 34

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.15em;margin:1.4em 0 .4em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;width:100%}th,td{padding:3px 8px;text-align:left;white-space:nowrap}
th{background:#f3f3f3;font-weight:600}tr:nth-child(even) td{background:#fafafa}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tr.active td{background:#fff6d5!important}.badge{display:inline-block;padding:0 6px;border-radius:8px;
color:#fff;font-size:12px}.active-badge{background:#b8860b}.muted{color:#777}
.role{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;vertical-align:middle}
ul.lineage{list-style:none;padding-left:1.2em;margin:.2em 0}ul.lineage li{margin:1px 0}
header{display:flex;justify-content:space-between;align-items:baseline;flex-wrap:wrap}
form{display:inline}code{background:#f3f3f3;padding:0 3px}
.login{max-width:360px;margin:4em auto}.login input{width:100%;margin:.2em 0 .8em;padding:4px}
.error{color:#b00020}.legend{margin-right:12px;white-space:nowrap}
"""


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _colour_key(row: dict[str, Any]) -> str:
    """What a row's colour stands for: its role (a bot), its CPU level, or its kind."""
    if row.get("kind") == "cpu" and row.get("id") in CPU_COLOURS:
        return str(row["id"])
    key = row.get("role") if row.get("kind") == "bot" else row.get("kind")
    return str(key) if key in ROLE_COLOURS else "?"


def _colour(row: dict[str, Any]) -> str:
    key = _colour_key(row)
    return CPU_COLOURS.get(key) or ROLE_COLOURS[key]


def legend(rows: Sequence[dict[str, Any]]) -> str:
    """The chart's legend: one entry per colour of ``rows`` (the members drawn), in a
    fixed order — roles, then kinds, then CPU levels — and nothing that is absent."""
    keys = {_colour_key(r) for r in rows}
    order = [k for k in ROLE_COLOURS if k in keys] + [k for k in CPU_COLOURS if k in keys]
    if not order:
        return ""
    names = {"?": "other"}
    return '<p class="muted" id="legend">' + " ".join(
        f'<span class="legend" data-key="{esc(k)}"><span class="role" style="background:'
        f'{CPU_COLOURS.get(k) or ROLE_COLOURS[k]}"></span>{esc(names.get(k, k))}</span>'
        for k in order) + "</p>"


def _when(t: float) -> str:
    """A match's time as a UTC date; a stored time no calendar holds (1e308, a negative
    one: stored by a service before the match-record rule had its window) is shown as
    the number it is — the page never fails on a record."""
    try:
        return _dt.datetime.fromtimestamp(t, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (ValueError, OverflowError, OSError):
        return f"{t!r} (outside {TIME_WINDOW})"


def _num(x: float | None, digits: int = 0) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


# ---------------------------------------------------------------- the chart
def drift_series(matches: Sequence[MatchRecord], ids: Sequence[str], k: float, initial: float,
                 keep: set[str] | None = None, anchor: tuple[str, float] | None = None,
                 ) -> dict[str, list[tuple[int, float]]]:
    """Each member's Elo after each of its rated matches, ``(match index, rating)``,
    starting at its first match (where it joined, at the initial rating: a member that
    first played at match 560 has no line before it), thinned to :data:`CHART_POINTS`
    (evenly, always keeping the first and the last): the same replay as the table's
    (``brawlkit.league.ratings.elo``, the same ``anchor``), so a line ends at the
    table's rating."""
    res = elo(matches, ids, k=k, initial=initial, anchor=anchor)
    series: dict[str, list[tuple[int, float]]] = {}
    for step in res.history:
        for mid, r in ((step.a, step.rating_a), (step.b, step.rating_b)):
            if keep is None or mid in keep:
                series.setdefault(mid, [(step.index, res.initial)]).append((step.index + 1, r))
    for mid, pts in series.items():
        if len(pts) > CHART_POINTS:
            stride = len(pts) / (CHART_POINTS - 1)
            series[mid] = [pts[int(i * stride)] for i in range(CHART_POINTS - 1)] + [pts[-1]]
    return series


def drift_svg(series: dict[str, list[tuple[int, float]]], colours: dict[str, str],
              n_matches: int) -> str:
    """The Elo-drift chart: one step line per member over the match log, coloured by
    role, with labelled axes.  An empty log is said in words, not a blank frame."""
    if not series or n_matches == 0:
        return '<p class="muted" id="elo-drift-empty">No matches yet: the chart starts with the first.</p>'
    lo = min(r for pts in series.values() for _, r in pts)
    hi = max(r for pts in series.values() for _, r in pts)
    if hi - lo < 20:
        lo, hi = lo - 10, hi + 10
    span_x = max(n_matches, 1)

    def x(i: float) -> float:
        return PAD_L + (W - PAD_L - PAD_R) * i / span_x

    def y(r: float) -> float:
        return PAD_T + (H - PAD_T - PAD_B) * (hi - r) / (hi - lo)

    parts = [f'<svg id="elo-drift" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" '
             f'width="100%" role="img" aria-label="Elo of every member over the match log">',
             f'<rect x="{PAD_L}" y="{PAD_T}" width="{W - PAD_L - PAD_R}" '
             f'height="{H - PAD_T - PAD_B}" fill="#fcfcfc" stroke="#ccc"/>']
    for j in range(5):  # horizontal grid with Elo labels
        r = lo + (hi - lo) * j / 4
        parts.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{y(r):.1f}" y2="{y(r):.1f}" '
                     f'stroke="#eee"/><text x="{PAD_L - 6}" y="{y(r) + 4:.1f}" font-size="11" '
                     f'text-anchor="end" fill="#555">{r:.0f}</text>')
    for j in range(6):
        i = span_x * j / 5
        parts.append(f'<text x="{x(i):.1f}" y="{H - PAD_B + 15}" font-size="11" '
                     f'text-anchor="middle" fill="#555">{_count(i)}</text>')
    parts.append(f'<text x="{(PAD_L + W - PAD_R) / 2}" y="{H - 4}" font-size="12" '
                 'text-anchor="middle" fill="#333">matches played (the log in replay order)</text>'
                 f'<text x="12" y="{(PAD_T + H - PAD_B) / 2}" font-size="12" fill="#333" '
                 f'text-anchor="middle" transform="rotate(-90 12 {(PAD_T + H - PAD_B) / 2})">Elo</text>')
    for mid, pts in series.items():
        path = [f"{x(pts[0][0]):.1f},{y(pts[0][1]):.1f}"]
        for (_, r0), (i1, r1) in zip(pts, pts[1:], strict=False):
            path.append(f"{x(i1):.1f},{y(r0):.1f} {x(i1):.1f},{y(r1):.1f}")  # a step
        parts.append(f'<polyline class="drift" data-member="{esc(mid)}" fill="none" '
                     f'stroke="{colours.get(mid, ROLE_COLOURS["?"])}" stroke-width="1.5" '
                     f'stroke-opacity="0.85" points="{" ".join(path)}"><title>{esc(mid)}: '
                     f'{pts[-1][1]:.0f}</title></polyline>')
    parts.append("</svg>")
    return "".join(parts)


def _count(i: float) -> str:
    return f"{i / 1e6:.1f}M" if i >= 1e6 else f"{i / 1e3:.1f}k" if i >= 1e4 else f"{i:.0f}"


# ---------------------------------------------------------------- the sections
def _leaderboard(table: dict[str, Any], records: dict[str, dict[str, Any]],
                 active_id: str | None) -> str:
    head = ('<table id="leaderboard"><thead><tr><th class="num">#</th><th>member</th>'
            '<th>kind</th><th>role</th><th class="num">gen</th>'
            '<th class="num">Bradley–Terry [95 %]</th><th class="num">live Elo</th>'
            '<th class="num">games</th><th class="num">W–D–L</th>'
            '<th class="num">unrated</th><th>blob</th></tr></thead><tbody>')
    rows = []
    for n, r in enumerate(table["members"], 1):
        mid = str(r["id"])
        rec = records.get(mid)
        badge = ' <span class="badge active-badge">active</span>' if mid == active_id else ""
        if rec is not None and rec.get("status") == "disabled":
            badge += ' <span class="muted">(disabled)</span>'
        bt = esc(bt_text(r))
        blob = (f'<a class="blob" href="/league/blob/{esc(mid)}" download="{esc(mid)}.bpw">'
                f'.bpw</a>' if rec is not None and rec.get("blob_sha256") else
                '<span class="muted">–</span>')
        cls = ' class="active"' if mid == active_id else ""
        rows.append(
            f'<tr data-id="{esc(mid)}"{cls}>'
            f'<td class="num">{n}</td><td><span class="role" style="background:{_colour(r)}">'
            f'</span>{esc(mid)}{badge}</td><td>{esc(r.get("kind", ""))}</td>'
            f'<td>{esc(r["role"])}</td><td class="num">{esc(_gen(r.get("generation")))}</td>'
            f'<td class="num bt">{bt}</td><td class="num elo">{r["rating"]:.1f}</td>'
            f'<td class="num">{r["games"]}</td>'
            f'<td class="num">{r["wins"]}–{r["draws"]}–{r["losses"]}</td>'
            f'<td class="num">{r.get("unrated", 0)}</td><td>{blob}</td></tr>')
    return head + "".join(rows) + "</tbody></table>"


def _gen(g: Any) -> str:
    return "–" if g is None else str(g)


def _lineages(records: Sequence[dict[str, Any]], active_id: str | None) -> str:
    """Each role's family tree: every checkpoint under its parent, by generation."""
    by_id = {str(r["id"]): r for r in records}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for r in records:
        parent = r.get("parent") if r.get("parent") in by_id else None
        children.setdefault(parent, []).append(r)

    def tree(parent: str | None, role: str) -> str:
        kids = sorted((c for c in children.get(parent, []) if c["role"] == role),
                      key=lambda c: (c["generation"], c["created"], c["id"]))
        if not kids:
            return ""
        items = []
        for c in kids:
            mark = ' <span class="badge active-badge">active</span>' if c["id"] == active_id else ""
            dis = ' <span class="muted">(disabled)</span>' if c.get("status") == "disabled" else ""
            items.append(f'<li>g{esc(c["generation"])} <code>{esc(c["id"])}</code>{mark}{dis}'
                         f'{tree(str(c["id"]), role)}</li>')
        return '<ul class="lineage">' + "".join(items) + "</ul>"

    roles = sorted({str(r["role"]) for r in records})
    if not roles:
        return '<p class="muted">No checkpoints registered yet.</p>'
    out = []
    for role in roles:
        out.append(f'<h3 data-role="{esc(role)}"><span class="role" style="background:'
                   f'{ROLE_COLOURS.get(role, ROLE_COLOURS["?"])}"></span>{esc(role)}</h3>'
                   + tree(None, role))
    return '<div id="lineage">' + "".join(out) + "</div>"


def _recent(matches: Sequence[MatchRecord]) -> str:
    """The last matches, newest first: each a real match (its own time, ticks and seed),
    with how each side played where it was not the fixed player (``training``,
    ``sampled``: not rated)."""
    if not matches:
        return '<p class="muted" id="recent-matches">No matches yet.</p>'
    verbs = {"win": "beat", "loss": "lost to", "draw": "drew with"}
    rows = []
    for m in list(matches)[-RECENT_MATCHES:][::-1]:
        how = [f"{side} {p}" for side, p in (("a", m.a_policy), ("b", m.b_policy)) if p != "fixed"]
        rows.append(f'<tr><td>{esc(_when(m.time))}</td><td>{esc(m.a)}</td><td>{verbs[m.result]}</td>'
                    f'<td>{esc(m.b)}</td><td class="num">{m.ticks}</td>'
                    f'<td class="num">{"–" if m.seed is None else m.seed}</td>'
                    f'<td>{esc(m.source)}</td><td>{esc(", ".join(how)) or "rated"}</td></tr>')
    return ('<table id="recent-matches"><thead><tr><th>time (UTC)</th><th>a</th><th>result</th>'
            '<th>b</th><th class="num">ticks</th><th class="num">seed</th><th>source</th>'
            '<th>played as</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>")


def render_page(table: dict[str, Any], records: Sequence[dict[str, Any]],
                matches: Sequence[MatchRecord], active: dict[str, Any] | None,
                agent: str, chart: str) -> str:
    """The whole page: the active checkpoint, the leaderboard (``table`` is the
    ``GET /ratings`` object itself), the Elo drift ``chart`` (:func:`drift_svg`), each
    role's lineage and the recent matches."""
    active_id = None if active is None else str(active["id"])
    by_id = {str(r["id"]): r for r in records}
    banner = (f'<p id="active">Active checkpoint (what people play by default): '
              f'<b>{esc(active_id)}</b> <span class="muted">({esc(active["role"])} g'
              f'{esc(active["generation"])})</span> — <a href="/league/blob/{esc(active_id)}" '
              f'download="{esc(active_id)}.bpw">download .bpw</a></p>' if active is not None
              else '<p id="active" class="muted">No checkpoint is active '
                   '(<code>python -m brawlkit registry activate ID</code>).</p>')
    drawn = [r for r in table["members"] if r.get("games")]
    boot = table.get("bootstrap", 0)
    anchor = table.get("anchor")
    scale = (f"anchored at {esc(anchor['id'])} = {anchor['rating']:g}" if anchor else
             "not anchored: the fixed ladder has not played (<code>python -m brawlkit elo "
             "--ladder</code> on a league directory)")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>BRAWLPIT league</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style></head>
<body><header><h1>BRAWLPIT league</h1><span class="muted">signed in as <b>{esc(agent)}</b> ·
<a id="ratings-json" href="/league/ratings.json">ratings JSON</a> · <form method="post" action="/league/logout">
<button type="submit">sign out</button></form></span></header>
{banner}
<h2>Leaderboard</h2>
<p class="muted">{table["matches"]} matches, {table.get("rated_matches", table["matches"])} rated
(both sides fixed players: a trainer's own episodes are not) · by Bradley–Terry, with 95 %
intervals from {boot} bootstrap resamples{"" if boot else " (none: no intervals)"}; the live
Elo (K = {table["k"]:g}) beside it · scale {scale} · "(few games)": fewer than 30 rated games
— the <code>GET /ratings</code> table.</p>
{_leaderboard(table, by_id, active_id)}
<h2>Elo drift</h2><p class="muted">The live Elo after each rated match, each line from
its member's first match.</p>{legend(drawn)}
{chart}
<h2>Lineage</h2>
{_lineages(records, active_id)}
<h2>Recent matches</h2>
{_recent(matches)}
</body></html>
"""


def login_page(message: str = "") -> str:
    """The sign-in form: an agent's name and secret, traded for the same bearer token
    ``POST /auth/token`` gives, kept in an HttpOnly cookie."""
    err = f'<p class="error" id="login-error">{esc(message)}</p>' if message else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>BRAWLPIT league: sign in</title>
<style>{_CSS}</style></head><body><div class="login"><h1>BRAWLPIT league</h1>
<p>Sign in with a registry agent (any scope). On the registry's machine,
<code>python -m brawlkit registry add-agent NAME --scope read --data DATA</code> prints its
secret, with <code>DATA</code> the directory this registry serves (<code>registry serve --data
DATA</code>), or <code>--db URL</code> for its database.</p>{err}
<form method="post" action="/league/login"><label>agent<input name="agent_id" autocomplete="username"
required></label><label>secret<input name="secret" type="password" autocomplete="current-password"
required></label><button type="submit">sign in</button></form></div></body></html>
"""
