"""The device wing: which device a command talks to, and everything needed to use it.

Naming and reaching a device (``entry``, ``inventory``, ``resolve``, ``reachability``), putting
files on it and back (``deploy``, ``pull``), driving its agent (``agent_client``,
``agent_stream``), learning what it is (``probe``, ``socs``, ``telemetry``, ``affinity``), and
diagnosing and setting it up (``checks``, ``doctor``, ``phone_checks``, ``wheels``, ``setup``,
``android_runtime``). The transports (:mod:`aiot.host.transports`) sit below it and take only
``entry`` and ``probe`` from it; the Android app (:mod:`aiot.host.app`) and the emulated devices
(:mod:`aiot.host.emulator`) sit beside it: ``doctor`` asks the app's check, and ``setup`` cuts a
phone's runtime from the emulated arm64 userland.
"""
