"""Which ranks the stall watchdog names; the deadline of the job's start."""
import re
import time

import pytest

from largebatch import errors
from imagenet_job.stall_watchdog import _start_overdue
from imagenet_job.stall_watchdog import describe
from imagenet_job.stall_watchdog import start_deadline
from imagenet_job.stall_watchdog import stalled_ranks


def test_silent_ranks_are_named_not_those_that_wait_for_them():
    heard = [100., 50., 99.]
    states = [[4, 9., 0, 0], [3, 1., 0, 0], [4, 9., 0, 0]]
    assert stalled_ranks(heard, states, 100., 8.) == [
        (1, 'sent nothing for 50 s')]


def test_without_a_silent_rank_those_stuck_in_an_update_are_named():
    states = [[4, 9., 0, 0], [4, 9.5, 0, 0], [0, 60., 1, 0]]  # 2: first
    assert stalled_ranks([100.] * 3, states, 100., 8.) == [
        (0, 'has been in update 5 for 9 s'),
        (1, 'has been in update 5 for 10 s')]
    assert stalled_ranks([100.] * 3, [[4, -1., 0, 0]] * 3, 100., 8.) == []


def test_a_rank_that_ended_is_not_silent():
    heard = [100., 50., 40.]  # rank 1 ended; rank 2 was never heard
    states = [[9, -1., 0, 0], [9, -1., 0, 1], None]
    assert stalled_ranks(heard, states, 100., 8.) == [
        (2, 'sent nothing for 60 s')]


def test_the_line_names_ranks_hosts_and_the_exit_status():
    assert describe([(1, 'sent nothing for 9 s')], ['a', 'b'], 8.) == (
        'no progress within --stall-timeout 8 s: rank 1 on b sent nothing '
        'for 9 s; ending the job (exit 5)')


def overrun(monkeypatch, capsys, rank, seconds):
    """The exit statuses a start block of ``seconds`` under a 0.2 s deadline
    ends with on launcher rank ``rank`` (grace 0.3 s), and its stderr."""
    monkeypatch.setenv('OMPI_COMM_WORLD_RANK', str(rank))
    exits = []
    with start_deadline(0.2, grace=0.3, exit=exits.append):
        time.sleep(seconds)
    time.sleep(0.1)
    return exits, capsys.readouterr().err


def test_a_start_within_the_deadline_goes_on(monkeypatch, capsys):
    assert overrun(monkeypatch, capsys, 0, 0.05) == ([], '')


def test_a_start_past_the_deadline_ends_the_job_rank_0_first(monkeypatch,
                                                             capsys):
    exits, err = overrun(monkeypatch, capsys, 0, 0.4)
    assert exits == [errors.STALLED_STATUS]
    assert re.fullmatch(
        r"\S+: error: no progress within --stall-timeout 0.2 s: the job's "
        r"start \(MPI, the communicator\) has not ended on rank 0 on \S+; a "
        r"worker is stopped there or its node is gone; ending the job "
        r"\(exit 5\)\n", err)
    # the others wait the grace for rank 0's end
    assert overrun(monkeypatch, capsys, 1, 0.4) == ([], '')
    exits, err = overrun(monkeypatch, capsys, 1, 0.6)
    assert exits == [errors.STALLED_STATUS] and 'on rank 1 on' in err


def test_no_deadline_at_a_timeout_of_0(monkeypatch):
    with start_deadline(0, exit=pytest.fail):
        time.sleep(0.05)


def test_a_worker_that_wakes_long_past_its_deadline_ends_silently(capsys):
    """It was the one stopped: the others have said so."""
    exits = []
    _start_overdue(0, 8, time.monotonic() - 11, 20, exits.append)
    assert exits == [errors.STALLED_STATUS]
    assert capsys.readouterr().err == ''
    _start_overdue(0, 8, time.monotonic() - 9, 20, exits.append)
    assert exits == [errors.STALLED_STATUS] * 2
    assert 'on rank 0 on' in capsys.readouterr().err
