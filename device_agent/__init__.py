"""The aiot device agent.

Runs on the device with only the standard library plus the runtime it drives (and NumPy,
which every runtime brings). It uses relative imports only, so the same files run as the
top-level ``device_agent`` package on a board and as ``aiot.device_agent`` on the host.

Its modules, each importing only those listed below it:

    __main__    ``python -m device_agent``: installs the seccomp handler, then ``cli.main``
    cli         the command line: ``hello``, ``session`` or ``COMMAND SPEC.json``
    session     one long-lived agent per device; each measurement in a forked child
    agent       ``execute`` a command on a spec; ``run`` (the timing loop), ``predict``,
                ``memory``, ``inspect``
    profiling   ``profile``: per-operator time from the runtime's own profiler
    serve       ``serve``: one loaded model answering batched predictions on stdin
    spec        ``RunSpec``: the run spec, one typed definition for host and agent
    wire        what the agent prints: ``emit`` (protocol lines), ``hello``
    backends/   the runtimes, one module each, to the ``Backend`` protocol (``contract.py``)
    process, cpuload, speedref, telemetry, seccomp, signature, stats, protocol: the ground floor
"""

AGENT_VERSION = "0.9.1"
