"""The model's predictions as a text table, a source list and a figure."""
import dataclasses
import math

from studies.scaling_model.hardware import UNITS
from studies.scaling_model.presets import (
    PAPER_EFFICIENCY_GPU, PAPER_EFFICIENCY_NODE, PAPER_GPUS, PAPER_SECONDS)


def format_duration(seconds):
    """Seconds as seconds, minutes or hours, whichever reads best."""
    if seconds < 120:
        return '{:.1f} s'.format(seconds)
    if seconds < 2 * 3600:
        return '{:.1f} min'.format(seconds / 60)
    return '{:.1f} h'.format(seconds / 3600)


def format_table(rows, cluster, workload):
    """The Predictions as a text table, times in ms."""
    lines = [
        '{}: {}'.format(cluster.name, cluster.description),
        '{} images per GPU, {:g} epochs of {:,} images, {} all-reduce of '
        '{:.1f} MB'.format(workload.batch_per_gpu, workload.epochs,
                           workload.train_images, workload.allreduce_dtype,
                           workload.gradient_bytes / 1e6),
        '',
        '{:>6} {:>5} {:>9} {:>8} {:>7} {:>7} {:>11} {:>14} {:>8} {:>9}'.format(
            'GPUs', 'nodes', 'iter [ms]', 'worker', 'intra', 'inter',
            'iterations', 'time to train', 'eff/GPU', 'eff/node'),
    ]
    for r in rows:
        t = r.iteration
        lines.append(
            '{:>6} {:>5} {:>9.1f} {:>8.1f} {:>7.1f} {:>7.1f} {:>11.0f} '
            '{:>14} {:>7.1f}% {:>9}'.format(
                r.gpus, r.nodes, 1e3 * t.total,
                1e3 * t.worker,
                1e3 * t.intra, 1e3 * t.inter, r.iterations,
                format_duration(r.seconds), 100 * r.efficiency_gpu,
                '-' if r.efficiency_node is None
                else '{:.1f}%'.format(100 * r.efficiency_node)))
    return '\n'.join(lines)


def format_sources(cluster):
    """Each parameter of ``cluster`` with its source."""
    lines = ['{}: {}'.format(cluster.name, cluster.description)]
    for field in dataclasses.fields(cluster):
        if field.name in cluster.sources:
            value = getattr(cluster, field.name)
            if field.name in UNITS:
                scale, unit = UNITS[field.name]
                value = '{:.4g} {}'.format(value / scale, unit).rstrip()
            lines.append('  {} = {}\n      {}'.format(
                field.name, value, cluster.sources[field.name]))
    return '\n'.join(lines)


def plot_scaling(rows, path, title, paper=False):
    """Write a PNG (to ``path``, a name or a binary file) of time to train
    (log scale) and scaling efficiency against the number of GPUs;
    ``paper`` marks the paper's figures."""
    from PIL import Image, ImageDraw, ImageFont

    width, height, margin = 1100, 460, (80, 50, 25, 60)  # left top right bot
    image = Image.new('RGB', (width, height), 'white')
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    draw.text((width // 2, 8), title, fill='black', font=font, anchor='mt')
    xs = [math.log2(r.gpus) for r in rows]
    x_range = (min(xs), max(max(xs), min(xs) + 1))

    def axes(left, right, y_range, y_ticks, y_label, heading):
        top, bottom = margin[1], height - margin[3]

        def to_pixel(x, y):
            u = (x - x_range[0]) / (x_range[1] - x_range[0])
            v = (y - y_range[0]) / (y_range[1] - y_range[0])
            return left + u * (right - left), bottom - v * (bottom - top)

        draw.rectangle((left, top, right, bottom), outline='black')
        draw.text(((left + right) / 2, top - 8), heading, fill='black',
                  font=font, anchor='mb')
        for r, x in zip(rows, xs):
            px, _ = to_pixel(x, y_range[0])
            draw.line((px, bottom, px, bottom + 4), fill='black')
            draw.text((px, bottom + 6), str(r.gpus), fill='black',
                      font=font, anchor='mt')
        draw.text(((left + right) / 2, bottom + 24), 'GPUs', fill='black',
                  font=font, anchor='mt')
        for y, label in y_ticks:
            _, py = to_pixel(x_range[0], y)
            draw.line((left, py, right, py), fill=(225, 225, 225))
            draw.text((left - 6, py), label, fill='black', font=font,
                      anchor='rm')
        draw.text((left - 6, top - 8), y_label, fill='black', font=font,
                  anchor='rb')
        return to_pixel

    def legend(left, top, slot, colour, label):
        y = top + 16 * slot
        draw.line((left, y, left + 20, y), fill=colour, width=2)
        draw.text((left + 25, y), label, fill='black', font=font,
                  anchor='lm')

    def curve(to_pixel, ys, colour):
        points = [to_pixel(x, y) for x, y in zip(xs, ys) if y is not None]
        draw.line(points, fill=colour, width=2)
        for px, py in points:
            draw.ellipse((px - 3, py - 3, px + 3, py + 3), fill=colour)

    def cross(to_pixel, x, y):
        px, py = to_pixel(x, y)
        draw.line((px - 6, py - 6, px + 6, py + 6), fill=red, width=2)
        draw.line((px - 6, py + 6, px + 6, py - 6), fill=red, width=2)

    seconds = [math.log10(r.seconds) for r in rows]
    ticks = [(math.log10(s), label) for s, label in (
        (10, '10 s'), (60, '1 min'), (600, '10 min'), (3600, '1 h'),
        (36000, '10 h'), (360000, '100 h'), (3600000, '1000 h'))]
    low = min(seconds + ([math.log10(PAPER_SECONDS)] if paper else []))
    high = max(seconds)
    y_range = (math.floor(low * 2) / 2, math.ceil(high * 2) / 2)
    if y_range[1] == y_range[0]:
        y_range = (y_range[0], y_range[0] + 0.5)
    half = width // 2
    blue, orange, red = (31, 119, 180), (255, 127, 14), (214, 39, 40)
    to_pixel = axes(margin[0], half - margin[2], y_range,
                    [t for t in ticks if y_range[0] <= t[0] <= y_range[1]],
                    '', 'time to train (log scale)')
    curve(to_pixel, seconds, blue)
    legend(half - margin[2] - 120, margin[1] + 14, 0, blue, 'model')
    if paper:
        cross(to_pixel, math.log2(PAPER_GPUS), math.log10(PAPER_SECONDS))
        legend(half - margin[2] - 120, margin[1] + 14, 1, red, 'paper')
    to_pixel = axes(half + margin[0], width - margin[2], (0, 105),
                    [(v, '{}%'.format(v)) for v in range(0, 101, 20)],
                    '', 'scaling efficiency')
    curve(to_pixel, [100 * r.efficiency_gpu for r in rows], blue)
    curve(to_pixel, [None if r.efficiency_node is None
                     else 100 * r.efficiency_node for r in rows], orange)
    bottom = height - margin[3] - 60
    legend(half + margin[0] + 15, bottom, 0, blue, 'vs 1 GPU')
    legend(half + margin[0] + 15, bottom, 1, orange, 'vs 1 node')
    if paper:
        for value in (PAPER_EFFICIENCY_GPU, PAPER_EFFICIENCY_NODE):
            cross(to_pixel, math.log2(PAPER_GPUS), 100 * value)
        legend(half + margin[0] + 15, bottom, 2, red, 'paper')
    image.save(path, format='PNG')
