"""Emulated devices (SSH via a private sshd, ADB via a device-side adbd) for trying aiot
without hardware and for CI. They use the very transports real devices use."""
