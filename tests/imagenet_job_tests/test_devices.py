"""imagenet_job.devices: the CUDA stack checked before the communicator."""
import pytest

import communicators
from imagenet_job import devices


@pytest.mark.parametrize('name, dtype, need_nccl', [
    (None, 'float16', True), ('pure_nccl', 'float32', True),
    ('non_cuda_aware', 'float32', True), ('naive', 'float32', False),
    ('flat', 'float32', False)])
def test_the_gpu_stack_is_checked_for_nccl_where_the_communicator_needs_it(
        monkeypatch, name, dtype, need_nccl):
    checked, built = [], []
    monkeypatch.setattr(devices, 'check_gpu_stack', lambda flag, allow, need:
                        checked.append((flag, need)))
    monkeypatch.setattr(communicators, 'create_communicator',
                        lambda *args, **kwargs: built.append(args))
    devices.create_communicator(name, dtype, False, gpu_flag='--gpu')
    assert checked == [('--gpu', need_nccl)]
    assert built == [(name or 'pure_nccl', dtype)]
