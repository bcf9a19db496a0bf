"""ImageNet-like JPEGs cut from a real photograph that matplotlib ships.

ImageNet's typical image is a 500x375 (or 375x500) JPEG of quality about
90 with 4:2:0 chroma; decoding and resizing costs depend on the content
(entropy-coded detail, edges), so solid colours or noise would mislead.
The photograph is matplotlib's sample ``grace_hopper.jpg`` (512x600).
"""
import os

import matplotlib.cbook
from PIL import Image

#: ``(crop box in the 512x600 photograph, saved size)``: three landscape
#: views and a portrait one.
VIEWS = (((0, 0, 512, 384), (500, 375)),
         ((0, 216, 512, 600), (500, 375)),
         ((31, 0, 481, 600), (375, 500)),
         ((0, 108, 512, 492), (500, 375)))


def write_photos(folder, count=len(VIEWS), quality=90):
    """Write ``count`` JPEGs of :data:`VIEWS` into ``folder``; their paths."""
    source = matplotlib.cbook.get_sample_data('grace_hopper.jpg',
                                              asfileobj=False)
    paths = []
    with Image.open(source) as photo:
        photo = photo.convert('RGB')
        for i in range(count):
            box, size = VIEWS[i % len(VIEWS)]
            path = os.path.join(folder, 'photo{}.jpg'.format(i))
            photo.crop(box).resize(size, Image.LANCZOS).save(
                path, quality=quality)
            paths.append(path)
    return paths
