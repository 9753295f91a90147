"""The Android app (``android_app/``): build it offline, install it, start the agent through it.

``aiot app build`` compiles the plain-Java sources of ``android_app/`` into a signed APK with
Debian's Android tools (:mod:`.sdk`, :mod:`.build`); ``aiot app install DEVICE`` installs it
with ``pm install`` over the device's Transport, and ``aiot run|sweep --via app`` starts the
device agent through the app's Instrumentation (``am instrument``) instead of the shell
(:mod:`.instrument`). Nothing here is imported by ``aiot --help``.
"""
