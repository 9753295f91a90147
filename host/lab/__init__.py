"""A lab of several hosts on Ray: each node owns the devices of its own inventory.

``aiot lab start --head`` / ``aiot lab join ADDRESS`` start Ray nodes (:mod:`.node`) that
advertise their devices as Ray custom resources (``aiot_device:<name>``); a sweep with
``--lab ADDRESS`` places one actor per device on the node that owns it (:mod:`.runner`) and
keeps the campaign engine, its retries and the store on the driver (:mod:`.session`).
Ray is an optional extra (``aiot[lab]``), imported only here.
"""
