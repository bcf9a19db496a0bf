from benchmarks import input_pipeline


def test_prints_the_paths_rates_ratios_profile_and_pixels(capsys):
    input_pipeline.main(['--rounds', '2', '--images', '4',
                         '--crop-size', '32'])
    out = capsys.readouterr().out
    for name, _ in input_pipeline.PATHS:
        assert '  {:<9} median'.format(name) in out
    assert 'new / old: ' in out and 'crop box / old: ' in out
    assert 'decode, Pillow' in out and 'normalize' in out
    assert '  new       max ' in out
