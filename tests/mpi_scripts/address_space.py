"""A test process's address space capped at its size now plus a headroom
(``RLIMIT_AS``), so that its next allocation beyond the headroom fails with
a real MemoryError, as a GPU's out-of-memory would."""
import resource


def size():
    """This process's address space in bytes (``VmSize``)."""
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('VmSize:'):
                return int(line.split()[1]) * 1024


def cap(headroom):
    """Limit the address space to :func:`size` plus ``headroom`` bytes."""
    resource.setrlimit(resource.RLIMIT_AS,
                       (size() + headroom, resource.RLIM_INFINITY))
