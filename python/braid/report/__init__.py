"""Reports of results folders (issue 29 step 6): ``pages`` (``braid report``: a run's, a sweep's
or a demo's HTML page, PNG/SVG/PDF figures and markdown), ``plots`` (the figures), ``html`` (the
self-contained page), ``compare`` (``braid compare``), ``latency`` (a tenant's latency) and
``buckets`` (FCT slowdown by flow size)."""

from .pages import MAX_FLOW_LINES, demo_page, make_report, plot_run, run_figures, run_images, run_page, sweep_page

__all__ = ["make_report", "plot_run", "run_page", "sweep_page", "demo_page", "run_figures", "run_images", "MAX_FLOW_LINES"]
