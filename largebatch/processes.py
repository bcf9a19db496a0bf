"""Whether a process still runs: for the sweeps that remove what killed
jobs leave behind (image index segments, private temporary folders).

A zombie (killed, not yet reaped by its parent) has let go of everything
and counts as gone; another user's process counts as running.
"""
import os


def runs(pid):
    """Whether process ``pid`` of this PID namespace exists and is not a
    zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    try:
        with open('/proc/{}/stat'.format(pid)) as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except (OSError, IndexError):  # no /proc, or it just ended
        return True
