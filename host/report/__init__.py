"""``aiot report``: a static page (or Markdown, or CSV) of what the result store holds.

- :mod:`aiot.host.report.build`: store records → a :class:`~aiot.host.report.build.Report`
  (rows, scores, telemetry, provenance) and its sections and tables; no plotting, no I/O
  beyond the store. A part without data is left out of the page (``Report.left_out`` says
  why, for the CLI).
- :mod:`aiot.host.report.tally`: what the sections read of the latency runs (counts, each
  key's plotted run, the run tables' rows, load times, trends, telemetry), filled from every
  run, or one run at a time in bounded memory by :mod:`aiot.host.report.scale` (a large store).
- :mod:`aiot.host.report.measures`: the load-time and telemetry sections.
- :mod:`aiot.host.report.page`: what a page is made of (sections, tables, columns).
- :mod:`aiot.host.report.summary`: the answer the page opens with (best median per model,
  device and format; formats compared) and the slowest operators of profiled runs.
- :mod:`aiot.host.report.robust`: the robustness suites' sections.
- :mod:`aiot.host.report.plots`: the report's matplotlib figures as PNG files (Agg, no
  display), readable at 20 series, the robustness suites' curves included; a figure without
  data is left out.
- :mod:`aiot.host.report.html`: the writers. HTML is one self-contained page (inline CSS, no
  scripts, nothing fetched) with its PNGs as files beside it; Markdown links the same PNGs;
  CSV writes one file per table.

matplotlib is the ``report`` extra and is imported only while plots are drawn.
"""
