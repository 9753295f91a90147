"""``aiot lab view``: the lab in a browser — devices, campaigns, results and reservations.

A Starlette application served by uvicorn on the lab's driver host (:mod:`.server`), live
through server-sent events; what it shows is read by :mod:`.sources` and rendered, escaped,
by :mod:`.pages`. Starlette, uvicorn and Jinja2 are the ``aiot[view]`` extra, imported only here.
"""
