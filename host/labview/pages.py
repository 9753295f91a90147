"""The lab view's HTML: Jinja2 templates with autoescape on, so every string a device, a file
or the store supplied (getprop values, model names, error reasons, notes) is text, never markup.
The page runs no inline script (the server's Content-Security-Policy forbids it): its one
script, :data:`SCRIPT`, swaps the live fragments the server pushes over server-sent events.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import jinja2
import markupsafe

from aiot.core.untrusted import visible
from aiot.host.store import identity
from aiot.host.store.placement import placement_text, short_text

_BASE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>aiot lab · {{ title }}</title>
<link rel="stylesheet" href="/app.css"><script src="/app.js" defer></script></head>
<body data-live="{{ live }}">
<nav><b>aiot lab</b> <a href="/">devices</a> <a href="/campaigns">campaigns</a>
<a href="/results">results</a> <a href="/compare">compare</a> <span class="who">{{ user }}</span></nav>
{% if csrf %}<form method="post" action="/logout" class="logout"><input type="hidden" name="csrf" value="{{ csrf }}"><button>log out</button> <button name="all" value="1" title="end every session of this lab view">log out everyone</button></form>{% endif %}
<main>{% block main %}{% endblock %}</main></body></html>
"""

_DEVICES = """{% extends "base" %}{% block main %}
<h1>Devices</h1><div id="live">{{ fragment }}</div>
<h2>Reserve a device</h2>
<form method="post" action="/reserve" class="reserve"><input type="hidden" name="csrf" value="{{ csrf }}">
<input name="device" placeholder="device" required> for <input name="for" value="2h" size="4">
<input name="note" placeholder="note" size="30"> <button>reserve</button></form>
{% endblock %}"""

_DEVICE_ROWS = """<table class="devices"><tr><th>device</th><th>node</th><th>state</th><th>SoC · cores</th>
<th>telemetry</th><th>setup</th><th>reservation</th><th>last error</th></tr>
{% for d in rows %}<tr class="state-{{ d.state }}" data-device="{{ d.name }}">
<td class="name">{{ d.name }}<br><small>{{ d.transport }}{% if d.model_name %} · {{ d.model_name }}{% endif %}</small></td>
<td>{{ d.node }}</td>
<td class="state">{{ d.state }}{% if d.busy %} with sweep {{ d.busy.sweep }} of {{ d.busy.user }}@{{ d.busy.host }}{% endif %}
<br><small>since {{ d.since|when }}</small></td>
<td>{{ d.soc or "?" }} · {{ d.cores or "?" }}</td>
<td>{% if d.telemetry %}{% set t = d.telemetry %}
{% if t.battery_pct is not none %}battery {{ t.battery_pct }}% {{ t.battery_status or "" }}<br>{% endif %}
{% if t.cpu_temp_max_c is not none %}{{ "%.1f"|format(t.cpu_temp_max_c) }} °C<br>{% endif %}
{% if t.cpu_freq_khz %}<small>{% for core, f in t.cpu_freq_khz.items() %}{{ core }}:{{ (f / 1000)|round|int }}{% if t.cpu_cap_khz and t.cpu_cap_khz.get(core) and t.cpu_cap_khz.get(core) < f %}!{% endif %} {% endfor %}MHz</small>{% endif %}
<small class="telemetry-when">{% if t.read_at %}read live {{ t.read_at|clock }}{% if t.error %}; now: {{ t.error }}{% endif %}{% else %}as of its newest record{% endif %}</small>
{% else %}—{% endif %}</td>
<td>{% if d.runtimes %}{{ d.runtimes|join(", ") }}{% elif d.last_run %}measured {{ d.last_run|when }}{% else %}—{% endif %}</td>
<td class="reservation">{% if d.reservation %}{{ d.reservation.user }} until {{ d.reservation.until|when }}
{% if d.reservation.note %}<br><small>{{ d.reservation.note }}</small>{% endif %}
<form method="post" action="/release"><input type="hidden" name="csrf" value="{{ csrf }}"><input type="hidden" name="device" value="{{ d.name }}"><button>release</button></form>
{% else %}free{% endif %}</td>
<td class="error">{{ d.last_error or "" }}{% if d.last_error_at %}<br><small>{{ d.last_error_at|when }}</small>{% endif %}</td>
</tr>{% endfor %}</table>"""

_CAMPAIGNS = """{% extends "base" %}{% block main %}<h1>Campaigns</h1><div id="live">{{ fragment }}</div>{% endblock %}"""

_CAMPAIGN_ROWS = """<h2>Running</h2>
{% for s in running %}<section class="sweep running" data-sweep="{{ s.sweep }}">
<h3>sweep <a href="/results?sweep_id={{ s.sweep|urlencode }}">{{ s.sweep }}</a> · {{ s.user }}@{{ s.host }}
<small><a href="/report/{{ s.sweep|urlencode }}/">report</a></small></h3>
<progress max="{{ s.total or 1 }}" value="{{ s.done }}"></progress>
<span class="progress">{{ s.done }}/{{ s.total or "?" }} done</span>, {{ s.failed }} failed,
elapsed {{ s.elapsed_s|duration }}{% if s.eta_s is not none %}, about {{ s.eta_s|duration }} left{% endif %}
{% if s.current %}<br>now: {{ s.current|join("; ") }}{% endif %}
{% if s.failures %}<ul class="failures">{% for f in s.failures %}<li>{{ f.device }} · {{ f.model }} · {{ f.format }}: {{ f.reason }}</li>{% endfor %}</ul>{% endif %}
</section>{% else %}<p>No sweep is running.</p>{% endfor %}
<h2>Recent sweeps</h2><table><tr><th>sweep</th><th></th><th>devices</th><th>started</th><th>ended</th><th>ok</th><th>failed</th><th>pending</th></tr>
{% for s in finished %}<tr data-sweep="{{ s.sweep_id }}"><td><a href="/results?sweep_id={{ s.sweep_id|urlencode }}">{{ s.sweep_id }}</a></td>
<td><a href="/report/{{ s.sweep_id|urlencode }}/">report</a>{% if not loop.last %} · <a href="/compare?a={{ loop.nextitem.sweep_id|urlencode }}&amp;b={{ s.sweep_id|urlencode }}" title="compare with the sweep before it">compare</a>{% endif %}</td>
<td>{{ s.devices }}</td><td>{{ s.started|when }}</td><td>{{ s.ended|when }}</td><td>{{ s.ok }}</td><td>{{ s.failed }}</td><td>{{ s.pending }}</td></tr>
{% for f in s.failures %}<tr class="failure"><td></td><td colspan="7">{{ f.device }} · {{ f.model }}: {{ f.reason }}</td></tr>{% endfor %}
{% endfor %}</table>"""

_RESULTS = """{% extends "base" %}{% block main %}<h1>Results</h1>
<form method="get" action="/results" class="filters">{% for name in names %}
<label>{{ name }} <input name="{{ name }}" value="{{ page.filters.get(name, "") }}" size="12"></label>{% endfor %}
<button>filter</button></form>
<p>{{ page.records|length }} record(s) on page {{ page.page + 1 }} of a store of {{ page.total }}.</p>
<table class="results"><tr><th>id</th><th>time</th><th>sweep</th><th>device</th><th>host</th><th>model</th><th>format</th><th>thr</th><th>status</th><th>median ms</th><th>reason</th></tr>
{% for r in page.records %}<tr><td><a href="/record/{{ r.id|urlencode }}">{{ r.id[:10] }}</a></td><td>{{ r.created_at|when }}</td>
<td>{{ r.sweep_id or "" }}</td><td>{{ r.device }}</td><td class="host">{{ r|host }}</td><td>{{ r.model }}</td>
<td>{{ r.format }}{% set partly = r.result|partly %}{% if partly %} <small class="partly">partly delegated: {{ partly }}</small>{% endif %}</td><td>{{ r.threads }}</td>
<td>{{ r.status }}</td><td>{{ "%.3f"|format(r.median_ms) if r.median_ms is not none else "" }}</td><td>{{ r.reason or "" }}</td></tr>{% endfor %}</table>
<p>{% if page.page > 0 %}<a href="/results?{{ query(page.page - 1) }}">newer</a>{% endif %}
{% if page.more %}<a href="/results?{{ query(page.page + 1) }}" class="older">older</a>{% endif %}</p>
{% endblock %}"""

_COMPARE = """{% extends "base" %}{% block main %}<h1>Compare two result sets</h1>
<form method="get" action="/compare" class="filters"><label>A (baseline) <input name="a" value="{{ a }}" size="28"></label>
<label>B <input name="b" value="{{ b }}" size="28"></label> <button>compare</button></form>
<p><small>Each set: a sweep id (or a prefix of one) or record ids separated by commas, as in
<code>aiot results compare A B</code>.</small></p>
{% if compared %}{% set c = compared.result %}
<p class="verdict {{ 'passed' if not c.failing and not c.incomplete else 'failed' }}">
B {{ compared.b.name }} ({{ compared.b.records|length }} runs) vs A {{ compared.a.name }} ({{ compared.a.records|length }} runs),
gate {{ check }}: {% if c.failing %}<b>{{ c.failing|length }} run(s) fail</b>{% elif c.incomplete %}<b>incomplete</b>: {{ c.incomplete }}{% else %}passed{% endif %}
· {% for status, n in c.counts()|dictsort %}{{ n }} {{ status }}{% if not loop.last %}, {% endif %}{% endfor %}</p>
{% for w in c.warnings %}<p class="warning">warning: {{ w }}</p>{% endfor %}
<table class="compare"><tr><th></th><th>status</th><th>run</th><th>A ms</th><th>B ms</th><th>change</th><th>A</th><th>B</th><th>A sha</th><th>B sha</th><th>notes</th></tr>
{% for row in c.rows %}{% set m = row.metrics.get(row.stat or "median") or {} %}
<tr class="status-{{ row.status|replace(' ', '-') }}"><td>{{ row.marker }}</td><td>{{ row.status }}</td><td>{{ row.label() }}</td>
<td>{{ m.get("a")|ms }}</td><td>{{ m.get("b")|ms }}</td><td>{{ "%+.1f%%"|format(m.get("change") * 100) if m.get("change") is not none else "—" }}</td>
<td>{% if row.a_id %}<a href="/record/{{ row.a_id|urlencode }}">{{ row.a_id[:8] }}</a>{% else %}—{% endif %}</td>
<td>{% if row.b_id %}<a href="/record/{{ row.b_id|urlencode }}">{{ row.b_id[:8] }}</a>{% else %}—{% endif %}</td>
<td class="sha">{{ (row.a_sha256 or "—")[:8] }}</td><td class="sha">{{ (row.b_sha256 or "—")[:8] }}</td>
<td>{{ (row.failures + ([row.reason] if row.reason else []) + (["another artifact"] if row.other_artifact else []) + (row.invalid|map("format_invalid")|list) + row.environment)|join("; ") }}</td></tr>
{% endfor %}</table>
<p><small>{{ legend }}</small></p>
{% endif %}{% endblock %}"""

_RECORD = """{% extends "base" %}{% block main %}<h1>Record {{ r.id }}</h1>
<table>{% for k, v in fields %}<tr><th>{{ k }}</th><td>{{ v }}</td></tr>{% endfor %}</table>
<h2>Spec, result and provenance</h2><pre>{{ detail }}</pre>{% endblock %}"""

_LOGIN = """{% extends "base" %}{% block main %}<h1>Log in</h1>
<p>{{ why }}</p>
<form method="post" action="/login" id="login"><input type="password" name="token" placeholder="token" size="70" autocomplete="off">
<br><input name="name" placeholder="your name" size="30" maxlength="40" required autocomplete="username">
<button>log in</button></form>{% endblock %}"""

_ERROR = """{% extends "base" %}{% block main %}<h1>{{ what }}</h1><p>{{ hint }}</p>{% endblock %}"""

STYLE = """body{font:14px system-ui,sans-serif;margin:0}nav{background:#223;color:#eee;padding:8px}
nav a{color:#9cf;margin:0 8px}.who{float:right}main{padding:8px 16px}table{border-collapse:collapse}
td,th{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
.state-online .state{color:#070}.state-busy .state{color:#a60}.state-offline .state{color:#b00}
.failures,.failure,.error,.failed,.warning,.partly{color:#900}.passed{color:#070}small{color:#666}form.reserve input{margin:2px}
form.logout{position:absolute;top:5px;right:8px;margin:0}nav .who{margin-right:230px}#login input{margin:2px}
"""

#: The page's one script: the login link's token comes in the URL's fragment (never sent to a
#: server, never in a log) and fills the form, which asks for the person's name (posted at
#: once if the browser filled that in); a live page swaps the fragments pushed to it, and
#: reloads (to the login page) when the server says its session ended.
SCRIPT = """(function(){
var f=document.getElementById('login');
if(f&&location.hash.length>1){var t=decodeURIComponent(location.hash.slice(1));
history.replaceState(null,'',location.pathname);f.token.value=t;var n=f.elements.namedItem('name');
if(n&&n.value){f.submit();}else if(n){n.focus();}return;}
var live=document.body.dataset.live;if(!live)return;
var es=new EventSource('/events/'+live);
es.addEventListener(live,function(e){document.getElementById('live').innerHTML=JSON.parse(e.data);});
es.addEventListener('ended',function(){es.close();location.reload();});
})();"""


def _duration(seconds) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


def _when(text) -> str:
    """An ISO 8601 UTC time as people read it: ``2026-11-27 03:48:30``."""
    if not isinstance(text, str):
        return "" if text is None else str(text)
    return text.replace("T", " ", 1).split(".")[0].removesuffix("+00:00")


def _visible(value):
    """What a page shows of a value: text with its control and bidirectional marks written out
    (a device's name with U+202E reads as it is, not reversed); markup the page made, as made."""
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return visible(value, keep="\t\n")
    return value


_ENV = jinja2.Environment(
    loader=jinja2.DictLoader({"base": _BASE, "devices": _DEVICES, "device_rows": _DEVICE_ROWS,
                              "campaigns": _CAMPAIGNS, "campaign_rows": _CAMPAIGN_ROWS, "results": _RESULTS,
                              "record": _RECORD, "login": _LOGIN, "error": _ERROR, "compare": _COMPARE}),
    autoescape=True, undefined=jinja2.ChainableUndefined, finalize=_visible)
_ENV.filters["duration"] = _duration
_ENV.filters["when"] = _when
_ENV.filters["clock"] = lambda ts: _when(datetime.fromtimestamp(ts, UTC).isoformat())
_ENV.filters["host"] = lambda record: identity.host_name_of(record) or "—"
_ENV.filters["ms"] = lambda value: "—" if value is None else f"{value:.3f}"
_ENV.filters["format_invalid"] = lambda side: f"{side} INVALID"
_ENV.filters["partly"] = short_text  # what a partly delegated run's engine left outside


def render(name: str, **values) -> str:
    """Template ``name`` with ``values`` (every string escaped)."""
    values.setdefault("live", "")
    values.setdefault("title", name)
    values.setdefault("user", "")
    values.setdefault("csrf", "")
    return _ENV.get_template(name).render(**values)


def record_fields(record) -> tuple[list[tuple[str, object]], str]:
    """A record's columns as (name, value) pairs, its placement last where it has one
    (:func:`aiot.host.store.placement.placement_text`), and its JSON parts as indented text."""
    data = record.to_dict()
    parts = {k: data.pop(k) for k in ("spec", "result", "provenance")}
    where = placement_text(record.result)
    return (list(data.items()) + ([("placement", where)] if where else []),
            json.dumps(parts, indent=1, default=str))
