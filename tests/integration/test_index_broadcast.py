"""Rank 0 alone reads the dataset index; every rank gets the same one."""
import json
import os

from conftest import run_mpi

DRIVER = 'tests/mpi_scripts/index_broadcast.py'


def write_dataset(tmp_path, train_lines):
    images = tmp_path / 'images'
    for cls in ('a', 'b'):
        os.makedirs(str(images / cls))
        for i in range(4):
            (images / cls / '{}.jpg'.format(i)).write_bytes(b'jpeg')
    (tmp_path / 'train.txt').write_text(train_lines)
    (tmp_path / 'val.txt').write_text('a/3.jpg 0\nb/3.jpg 1\n')
    return [str(images), str(tmp_path / 'train.txt'),
            str(tmp_path / 'val.txt'), str(images)]


def test_only_rank_0_touches_image_paths_and_all_get_one_index(tmp_path):
    lines = ''.join('{}/{}.jpg {}\n'.format(cls, i, label)
                    for i in range(3) for label, cls in enumerate('ab'))
    proc = run_mpi(4, [DRIVER] + write_dataset(tmp_path, lines))
    reports = sorted((json.loads(line) for line in proc.stdout.splitlines()
                      if line.startswith('{')), key=lambda r: r['rank'])
    assert [r['rank'] for r in reports] == [0, 1, 2, 3]
    assert reports[0]['calls'] >= 8  # 6 training + 2 validation images
    assert [r['calls'] for r in reports[1:]] == [0, 0, 0]
    for key in ('train', 'val', 'n_class'):
        assert len({json.dumps(r[key]) for r in reports}) == 1
    assert reports[0]['train'][0] == 6 and reports[0]['val'][0] == 2
    assert all(r['loader_matches'] for r in reports)


def test_bad_list_file_ends_every_rank_with_one_line(tmp_path):
    args = write_dataset(tmp_path, 'a/0.jpg 0\na/1.jpg\n')
    proc = run_mpi(2, [DRIVER] + args, check=False)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if 'error:' in line]
    assert errors == ['index_broadcast.py: error: {}:2: expected "<image '
                      'path> <integer label>", got \'a/1.jpg\''
                      .format(args[1])]
    assert '{' not in proc.stdout
