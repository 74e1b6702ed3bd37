import numpy as np

from pydvfs.roofline import proxies


def test_paper_formulas():
    # BERT-base: L=12, d=768, ff=3072, S=128, B=32
    assert proxies.params_n(12, 768, 3072) == 12 * (12 * 768**2 + 2 * 768 * 3072)
    assert proxies.compute_per_token(12, 768, 128) == 12 * 12 * 768**2 + 3 * 12 * 128 * 768
    assert proxies.total_compute(12, 768, 128, 32, steps=2) == proxies.compute_per_token(12, 768, 128) * 32 * 128 * 2
    assert proxies.memory_traffic(32, 128, 768, 12) == 32 * 128 * 768 * 12
    assert proxies.attention_traffic(32, 128, 12) == 32 * 128**2 * 12


def test_tile_width_rounds_up_and_works_on_arrays():
    assert proxies.tile_width(64) == 128
    assert proxies.tile_width(128) == 128
    assert proxies.tile_width(129) == 256
    assert proxies.tile_width(100, tile=None) == 100
    np.testing.assert_array_equal(proxies.tile_width(np.array([64.0, 320.0, 384.0])), [128, 384, 384])


def test_intensity_grows_with_width():
    c1 = proxies.total_compute(4, 256, 128, 8)
    c2 = proxies.total_compute(4, 1024, 128, 8)
    i1 = proxies.arithmetic_intensity(c1, proxies.memory_traffic(8, 128, 256, 4))
    i2 = proxies.arithmetic_intensity(c2, proxies.memory_traffic(8, 128, 1024, 4))
    assert i2 > i1 > 0
