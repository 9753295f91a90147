"""The device wing: which device a command talks to and everything needed to use it.

Choosing and opening a device (:mod:`~aiot.host.devices.resolve`, the inventory), putting
files on it (deploy, pull), driving its agent (agent client and stream), probing it (SoCs,
telemetry, CPU affinity), diagnosing and setting it up (doctor, phone checks, setup, the
Android runtime) and a quick reachability state. Transports, the Android app, emulated devices
and native benchmark binaries are this wing's neighbours in ``aiot.host``.
"""
