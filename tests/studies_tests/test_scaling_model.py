"""The scaling model: its arithmetic on cases small enough to do by hand,
monotonicity, the paper's 15 minutes, measured inputs and the CLI."""
import dataclasses
import json
import os

import pytest
from PIL import Image

from studies.scaling_model import __main__ as cli
from studies.scaling_model import hardware, model, presets

# 2 GPUs per node, groups of 2 nodes below leaves with 3:1 uplinks.
TOY = hardware.Cluster(
    name='toy', description='by hand', gpus_per_node=2, images_per_s=100,
    intra_bandwidth=400, intra_latency=0, node_bandwidth=600,
    inter_latency=0, nodes_per_group=2, oversubscription=3,
    ring_order='random', host_to_device=1200, loader_images_per_s=400)
# 400-byte gradient, 10 images of 1x1 px (120 bytes) per GPU, 800 images.
TOY_WORK = hardware.Workload(
    batch_per_gpu=10, epochs=2, train_images=800, parameters=100,
    allreduce_dtype='float32', crop_size=1)


def test_ring_allreduce_by_hand():
    assert model.ring_reduce_scatter_time(4, 8.0, 1.0, 0) == 6.0
    assert model.ring_allreduce_time(4, 8.0, 1.0, 0) == 12.0   # 2 x 3/4 x 8
    assert model.ring_allreduce_time(4, 8.0, 1.0, 0.5) == 15.0  # + 2 x 3 x 0.5
    assert model.ring_allreduce_time(1, 8.0, 1.0, 0.5) == 0.0


def test_thin_tree_by_hand():
    assert model.cross_group_fraction(2, 2, 'random') == 0.0
    assert model.cross_group_fraction(4, 2, 'random') == pytest.approx(2 / 3)
    assert model.cross_group_fraction(4, 2, 'grouped') == 0.5
    assert model.thin_tree_slowdown(4, TOY) == pytest.approx(2.0)
    grouped = dataclasses.replace(TOY, ring_order='grouped')
    assert model.thin_tree_slowdown(4, grouped) == pytest.approx(1.5)
    fat = dataclasses.replace(TOY, oversubscription=1)
    assert model.thin_tree_slowdown(4, fat) == 1.0


def test_iteration_by_hand():
    t = model.iteration_time(8, TOY, TOY_WORK)      # 4 nodes x 2 GPUs
    assert t.compute == pytest.approx(0.1)        # 10 / 100
    assert t.load == pytest.approx(0.05)          # 10 x 2 / 400, hidden
    assert t.host_to_device == pytest.approx(0.1)  # 120 / 1200
    assert t.intra == pytest.approx(1.0)          # 2 x 1/2 x 400 / 400
    assert t.inter == pytest.approx(2.0)          # 2 x 3/4 x 400 x 2 / 600
    assert t.total == pytest.approx(3.2)
    assert model.iterations(8, TOY_WORK) == 20.0     # 2 x 800 / 80
    assert model.time_to_train(8, TOY, TOY_WORK) == pytest.approx(64.0)
    one = model.iteration_time(1, TOY, TOY_WORK)
    assert (one.intra, one.inter) == (0.0, 0.0)
    assert one.load == pytest.approx(0.025)
    slow_loader = dataclasses.replace(TOY, loader_images_per_s=100)
    assert model.iteration_time(8, slow_loader, TOY_WORK).worker == (
        pytest.approx(0.3))                       # 20 / 100 + 0.1
    measured = model.iteration_time(8, TOY, TOY_WORK, step_time=0.5)
    assert measured.total == pytest.approx(3.5)


def test_predict_efficiencies_by_hand():
    rows = model.predict([1, 2, 8], TOY, TOY_WORK)
    assert [r.nodes for r in rows] == [1, 1, 4]
    assert rows[0].efficiency_gpu == 1.0 and rows[0].efficiency_node is None
    assert rows[1].efficiency_node == 1.0
    assert rows[2].efficiency_gpu == pytest.approx(0.2 / 3.2)
    assert rows[2].efficiency_node == pytest.approx(1.2 / 3.2)


def test_the_paper_preset_lands_within_10_percent_of_15_minutes():
    mn1 = presets.PRESETS['mn1']
    assert model.iterations(1024) == pytest.approx(3519, abs=1)
    assert model.time_to_train(1024, mn1) == pytest.approx(15 * 60, rel=0.1)
    assert model.iteration_time(1024, mn1).total == pytest.approx(
        0.256, rel=0.1)
    (row,) = model.predict([1024], mn1)
    assert row.efficiency_gpu == pytest.approx(0.70, abs=0.05)
    assert row.efficiency_node == pytest.approx(0.80, abs=0.05)
    fp32 = hardware.Workload(allreduce_dtype='float32')
    assert (model.time_to_train(1024, mn1, fp32)
            > 1.2 * model.time_to_train(1024, mn1))


@pytest.mark.parametrize('preset', sorted(presets.PRESETS))
def test_monotonic_in_gpus(preset):
    cluster = presets.PRESETS[preset]
    counts = list(range(1, 65)) + [2 ** i for i in range(7, 13)]
    rows = model.predict(counts, cluster)
    per_iteration = [r.iteration.total for r in rows]
    assert per_iteration == sorted(per_iteration)
    to_train = [r.seconds for r in rows]
    assert all(a > b for a, b in zip(to_train, to_train[1:]))


@pytest.mark.parametrize('preset', sorted(presets.PRESETS))
@pytest.mark.parametrize('field,factor', [
    ('intra_bandwidth', 2), ('node_bandwidth', 2), ('host_to_device', 2),
    ('loader_images_per_s', 4), ('images_per_s', 2),
    ('intra_latency', 0.5), ('inter_latency', 0.5),
    ('oversubscription', 0.5)])
def test_faster_hardware_is_never_slower(preset, field, factor):
    cluster = presets.PRESETS[preset]
    value = max(1, getattr(cluster, field) * factor) \
        if field == 'oversubscription' else getattr(cluster, field) * factor
    faster = dataclasses.replace(cluster, **{field: value})
    for gpus in (1, 8, 64, 256, 1024, 4096):
        assert (model.iteration_time(gpus, faster).total
                <= model.iteration_time(gpus, cluster).total)


def test_measured_allreduce_round_trips():
    seconds = model.ring_allreduce_time(5, 1e6, 3e9, 2e-6)
    assert model.bandwidth_from_allreduce(seconds, 5, 1e6, 2e-6) == (
        pytest.approx(3e9))
    mn1, nbytes = presets.PRESETS['mn1'], hardware.Workload().gradient_bytes
    inside = model.calibrate_allreduce(mn1, 0.02, 8, nbytes)
    assert model.iteration_time(8, inside).intra == pytest.approx(0.02)
    across = model.calibrate_allreduce(mn1, 0.1, 1024, nbytes)
    t = model.iteration_time(1024, across)
    assert t.intra + t.inter == pytest.approx(0.1)
    with pytest.raises(ValueError, match='at least 2 processes'):
        model.bandwidth_from_allreduce(1.0, 1, 1e6)
    with pytest.raises(ValueError, match='not above'):
        model.calibrate_allreduce(mn1, 0.001, 1024, nbytes)


def test_cli_table_and_plot(tmp_path, capsys):
    png = tmp_path / 'scaling.png'
    cli.main(['--gpus', '1', '8', '1024', '--plot', str(png)])
    out = capsys.readouterr().out
    assert 'paper at 1024 GPUs: 15.0 min' in out
    assert len([line for line in out.splitlines()
                if line.strip().startswith(('1 ', '8 ', '1024 '))]) == 3
    with Image.open(png) as image:
        assert image.size == (1100, 460)


@pytest.mark.parametrize('make, force, message', [
    (lambda plot: plot.write_bytes(b'mine'), False,
     '{plot} exists already; --force replaces it'),
    (lambda plot: os.symlink('precious', str(plot)), False,
     '{plot} exists already; --force replaces it'),
    (lambda plot: os.mkfifo(str(plot)), True,
     '{plot} is a FIFO; it is never replaced'),
    (None, False, '{plot}: its folder {plot.parent} does not exist'),
])
def test_cli_plot_refused_in_one_line(tmp_path, capsys, make, force,
                                      message):
    plot = tmp_path / 'scaling.png'
    if make is None:
        plot = tmp_path / 'missing' / 'scaling.png'
    else:
        make(plot)
    before = sorted(os.listdir(str(tmp_path)))
    with pytest.raises(SystemExit) as info:
        cli.main(['--gpus', '8', '--plot', str(plot)] +
                 (['--force'] if force else []))
    assert info.value.code == 2
    assert capsys.readouterr().err == (
        'python -m studies.scaling_model: error: --plot {}\n'.format(
            message.format(plot=plot)))
    assert sorted(os.listdir(str(tmp_path))) == before


def test_cli_plot_with_force_replaces_a_link_not_its_target(tmp_path):
    target = tmp_path / 'precious'
    target.write_bytes(b'keep me')
    plot = tmp_path / 'scaling.png'
    os.symlink(str(target), str(plot))
    cli.main(['--gpus', '8', '--plot', str(plot), '--force'])
    assert not plot.is_symlink()
    with Image.open(plot) as image:
        assert image.size == (1100, 460)
    assert target.read_bytes() == b'keep me'


def test_cli_modern_cluster_and_measured_figures(capsys):
    cli.main(['--preset', 'h100', '--gpus', '1024', '--json'])
    (h100,) = json.loads(capsys.readouterr().out)
    assert h100['seconds'] < 5 * 60
    cli.main(['--gpus', '1024', '--json', '--step-time', '0.1',
             '--allreduce-time', '0.05', '--allreduce-procs', '8'])
    (measured,) = json.loads(capsys.readouterr().out)
    assert measured['iteration']['compute'] == 0.1
    assert measured['iteration']['intra'] == pytest.approx(0.05)
    cli.main(['--sources', '--node-gbytes-per-s', '25'])
    out = capsys.readouterr().out
    assert 'node_bandwidth = 25 GB/s\n      command line' in out
    assert 'FDR' not in out.split('node_bandwidth')[1].split('\n')[1]


@pytest.mark.parametrize('argv,message', [
    (['--gpus', '0'], '--gpus must be positive'),
    (['--allreduce-time', '0.1'], 'go together'),
    (['--images-per-s', '-5'], 'images_per_s must be positive'),
    (['--oversubscription', '0.5'], 'oversubscription must be at least 1'),
    (['--batchsize', '0'], 'batch_per_gpu must be positive'),
    (['--step-time', '0'], '--step-time must be positive'),
    (['--allreduce-time', '1', '--allreduce-procs', '1'],
     'at least 2 processes'),
])
def test_cli_bad_input(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err
