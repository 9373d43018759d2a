"""bench/sass.py: programs an SM from registers and shared memory, loops found in SASS, and one
real decode kernel compiled for sm90 and disassembled here (no GPU)."""

import pytest

from bench import sass

SASS = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_0:
        /*0010*/                   LDGSTS.E.BYPASS.128 [R3], desc[UR4][R4.64] ;
        /*0020*/                   HMMA.16816.F32.BF16 R8, R12, R16, R8 ;
.L_x_1:
        /*0030*/                   LOP3.LUT R2, R2, 0xf, RZ, 0xc0, !PT ;
        /*0040*/              @!P0 BRA `(.L_x_1) ;
        /*0050*/                   HADD2.BF16_V2 R2, R2, R3 ;
        /*0060*/               @P1 BRA `(.L_x_0) ;
        /*0070*/                   BRA `(.L_x_2) ;
.L_x_2:
        /*0080*/                   EXIT ;
"""


def test_programs_an_sm_are_the_least_of_registers_shared_memory_and_the_limit():
    # MX fp8's decode tile (session 35): 80 registers, 48 KB, 2 warps
    assert sass.fit(80, 49152, 2) == {"by_regs": 12, "by_shared": 4, "programs": 4}
    # registers go 256 a warp at a time: 127 a thread is 128's 4096 a warp
    assert sass.fit(127, 13312, 2)["by_regs"] == 8
    assert sass.fit(16, 0, 1)["programs"] == 32  # the hardware's limit
    assert sass.fit(16, 0, 1, "sm89")["programs"] == 24
    assert sass.fit(80, 49152, 2, "sm80")["by_shared"] == 3  # 164 KB there


def test_loops_are_backward_branches_largest_first():
    found = sass.loops(SASS)
    assert [(lp.start, lp.end) for lp in found] == [(1, 6), (3, 4)]
    assert found[0].mix == {"LDGSTS": 1, "HMMA": 1, "LOP3": 1, "BRA": 2, "HADD2": 1}
    assert sass.opcode("@!P0 LDG.E.128 R4, [R2.64]") == "LDG"


def test_a_decode_kernel_compiled_and_disassembled_here():
    """int4's tiled decode at 8 rows: its main loop holds the matrix and async-copy
    instructions, and the tile's 6 programs an SM fit (bench/NOTES.md: 357 instructions a
    64 x 128-code step in session 28's count)."""
    pytest.importorskip("triton")
    (spec,) = sass.pick("sm90", ["int4wo.decode_mma_tiled_m8"])
    res = sass.look(spec, "sm90", n_loops=1)
    assert res["ok"] and res["spills"] == 0
    (main,) = res["loops"]
    assert main["mix"]["HMMA"] >= 16 and main["mix"]["LDGSTS"] >= 1 and main["size"] > 200
    assert res["fit"]["programs"] >= 6
    text = sass.render(spec, res, 6)
    assert text.startswith("int4wo.decode_mma_tiled_m8: ") and "loop of" in text


def test_no_spec_matches_is_a_clear_exit():
    with pytest.raises(SystemExit, match="no spec on sm90 matches"):
        sass.pick("sm90", ["no-such-kernel"])


def test_a_register_cap_reaches_the_compiler():
    """``maxnreg`` (the launch option, NVIDIA): int4's 8-row decode at 112 registers a
    thread fits 9 programs an SM without spills (128 uncapped: 8)."""
    pytest.importorskip("triton")
    import dataclasses

    (spec,) = sass.pick("sm90", ["int4wo.decode_mma_tiled_m8"])
    res = sass.look(dataclasses.replace(spec, maxnreg=112), "sm90", n_loops=1)
    assert res["ok"] and res["regs"] <= 112 and res["spills"] == 0
    assert res["fit"]["programs"] == 9


def test_a_decode_spec_reports_the_per_sm_of_its_rows_tile():
    """The split's aim printed beside a decode spec: TILE's up to 16 rows, ROWS_TILE's past
    them (here MX fp4's 64-row tile: 2 an SM; NVFP4's 32-row tile: 8)."""
    pytest.importorskip("triton")
    picked = sass.pick(
        "sm90", ["int4wo.decode_mma_tiled_m8", "mxwo_fp4.decode_mma_m64", "nvfp4wo.decode_mma_m32"]
    )
    assert {s.name: sass._per_sm(s) for s in picked} == {
        "int4wo.decode_mma_tiled_m8": 6,
        "mxwo_fp4.decode_mma_m64": 2,
        "nvfp4wo.decode_mma_m32": 8,
    }
