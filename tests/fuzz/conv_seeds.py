#!/usr/bin/python3
"""Write the conv_* seeds of corpus_api/ (the input format of fuzz_api.c).

Usage: /usr/bin/python3 tests/fuzz/conv_seeds.py tests/fuzz/corpus_api

Each seed sets flag 32 (a convpool_layer) and bit 8 of the algo byte (the conv
fields), so it decodes to the layer its name gives; the tensor bytes are
ordinary values in [-2, 2], drawn from a generator seeded with the name.
"""
import os, random, sys
out = sys.argv[1]
DT = {'f32': 0, 'f16': 5, 'bf16': 10}
ALGO = {'auto': 0, 'sr': 3, 'im2col': 5, 'winograd': 7}
STRIDE = {1: 0, 2: 1, 3: 2, 4: 3, 0: 4, -1: 5, 'max': 6, 'max+1': 7, 'int64max': 15}
DIL = {1: 0, 2: 3, 3: 4, 0: 5, -1: 6, 'max+1': 7, 'max': 15}
GROUPS = {1: 0, 2: 2, 'gcd': 3, 'dw1': 4, 'dw2': 5, 0: 6, -1: 14, 'cin+1': 7, 3: 15}
def res_code(kind, off=0):
    base = {'none': 0, 'own': 3, 'over_dst': 5, 'src': 6}
    if kind in base: return base[kind] | (off << 3)
    sub = {'null': 0, 'unwanted': 1, 'flag2': 2, 'misaligned': 3}[kind]
    return 7 | (sub << 3)
BATCH = {1: 0, 2: 2, 3: 3}
def seed(name, dtype='f32', batch=1, cin=4, cout=8, k=3, pool=2, hx=3, wx=4, threads=2,
         algo='auto', bias=1, pad=(0, 0, 0, 0), act=0, pstride=0, ppad=(0, 0, 0, 0), ceil=0,
         stride=1, dil=1, groups=1, res='none', roff=0, nvalues=64, rng_seed=None):
    a = ALGO[algo] | 8
    b = [DT[dtype], BATCH[batch], cin - 1, cout - 1, k - 1, pool - 1, hx, wx, threads, 0, a]
    if algo == 'winograd': b.append(0)  # an even byte: winograd
    b += [(1 if bias else 0) | 32, 0, 0, 200]
    b += [sum(p << (2 * s) for s, p in enumerate(pad)), act, pstride,
          sum(p << (2 * s) for s, p in enumerate(ppad)), ceil]
    b += [STRIDE[stride], DIL[dil], GROUPS[groups], res_code(res, roff)]
    r = random.Random(rng_seed if rng_seed is not None else name)
    b += [r.randrange(0x60, 0xa1) for _ in range(nvalues)]
    assert all(0 <= v < 256 for v in b), name
    open(os.path.join(out, name), 'wb').write(bytes(b))
# the names the corpus had, each now encoding what it says
seed('conv_depthwise_s2_sr', dtype='f16', cin=4, groups='dw1', stride=2, algo='sr', hx=5, wx=7)
seed('conv_dilation2_groups2_im2col', dtype='bf16', cin=4, cout=6, dil=2, groups=2, algo='im2col', pad=(1, 1, 1, 1))
seed('conv_dilation2_sr_declined', dil=2, algo='sr')
seed('conv_groups_invalid', cin=4, cout=8, groups=0)
seed('conv_residual_invalid', res='flag2')
seed('conv_residual_over_dst', res='over_dst', roff=5)
seed('conv_stride2_residual', stride=2, res='own', act=1, hx=6, wx=9)
seed('conv_stride2_winograd_declined', stride=2, algo='winograd')
seed('conv_stride3_dilation3', cin=2, cout=3, k=3, stride=3, dil=3, pool=2, hx=8, wx=11, pad=(2, 1, 0, 3))
seed('conv_stride_zero', stride=0)
# depthwise, channel multipliers 1 and 2, strides 1 and 2, on each algorithm
seed('conv_depthwise_m1_s1_auto', cin=5, groups='dw1', k=3, threads=3)
seed('conv_depthwise_m2_s2_auto', dtype='bf16', cin=6, groups='dw2', k=5, stride=2, pool=3, pstride=2, hx=9, wx=4)
seed('conv_depthwise_m2_s1_sr', algo='sr', cin=3, groups='dw2', k=3, pad=(1, 1, 1, 1), act=1)
seed('conv_depthwise_m2_s2_sr', algo='sr', dtype='bf16', cin=6, groups='dw2', k=3, stride=2, pad=(1, 0, 1, 0), bias=0)
seed('conv_depthwise_m1_s2_im2col', algo='im2col', dtype='f16', cin=6, groups='dw1', k=3, stride=2, hx=3, wx=10)
seed('conv_depthwise_m2_s1_im2col', algo='im2col', cin=4, groups='dw2', k=2, pool=3, ceil=1, hx=6, wx=2)
seed('conv_depthwise_m1_s1_winograd_declined', cin=4, groups='dw1', algo='winograd')
seed('conv_depthwise_m2_s2_winograd_declined', cin=3, groups='dw2', stride=2, algo='winograd')
# dilation and groups
seed('conv_dilation2_auto', dtype='f16', cin=3, cout=5, k=3, dil=2, hx=4, wx=9)
seed('conv_dilation3_im2col', cin=2, cout=7, k=3, dil=3, algo='im2col', pad=(3, 2, 1, 0), act=2)
seed('conv_dilation2_k1_sr', cin=3, cout=4, k=1, dil=2, algo='sr')
seed('conv_dilation_limit_k1', cin=2, cout=3, k=1, dil='max')
seed('conv_dilation_zero', dil=0)
seed('conv_groups2_sr', cin=4, cout=6, groups=2, algo='sr', stride=2, hx=7, wx=5)
seed('conv_groups_gcd_auto', dtype='bf16', cin=6, cout=9, groups='gcd', threads=4)
seed('conv_groups_not_dividing', cin=3, cout=6, groups=2)
seed('conv_groups_cin_plus_1', cin=4, cout=10, groups='cin+1')
# residual
seed('conv_residual_relu_bf16', dtype='bf16', batch=2, cin=3, cout=5, res='own', act=1, pad=(1, 1, 1, 1))
seed('conv_residual_winograd', cin=6, cout=5, res='own', algo='winograd', hx=9, wx=6)
seed('conv_residual_depthwise_sr', dtype='f16', cin=4, groups='dw2', stride=2, res='own', algo='sr', hx=4, wx=8)
seed('conv_residual_is_src', cin=6, cout=3, res='src')
seed('conv_residual_null', res='null')
seed('conv_residual_unwanted', res='unwanted')
seed('conv_residual_misaligned', dtype='f16', res='misaligned')
# stride limits
seed('conv_stride_negative', stride=-1)
seed('conv_stride_limit', cin=2, cout=2, k=2, pool=1, stride='max')
seed('conv_stride_past_limit', stride='max+1')
seed('conv_stride_int64_max', stride='int64max')
seed('conv_stride4_pool_pads_p_minus_1_ceil', cin=2, cout=3, k=3, pool=4, pstride=2, ppad=(3, 3, 3, 3), ceil=1, stride=4, hx=2, wx=9)
seed('conv_pool_pads_p_minus_1_ceil_dilation2', dtype='f16', cin=4, cout=4, k=3, pool=3, pstride=3, ppad=(2, 1, 2, 2), ceil=1, dil=2, groups=2, algo='im2col', hx=1, wx=5)
