"""Which ranks the stall watchdog names."""
from extensions.stall_watchdog import describe
from extensions.stall_watchdog import stalled_ranks


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
