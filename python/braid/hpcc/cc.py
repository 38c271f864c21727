"""``braid import-hpcc``: HPCC ns-3's congestion-control keys → ``[transport]``.

``CC_MODE`` 1 (DCQCN) maps to ``[transport.dcqcn]`` (HPCC's own DCQCN model), 7 (TIMELY) and 8
(DCTCP) to ``transport.cc`` (``crates/braid-sim/src/cc/``); other modes need ``--cc-fallback``.
``h`` is ``braid.hpcc.convert``, whose parsers (from ``config.py``) and error type are used
here. Only the format is used, none of HPCC's code.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple


def transport(
    h, cpath: Path, cfg, get, qcn: bool, cc_fallback: Optional[str], ignored: List[Tuple[str, str]], notes: List[str], approx
) -> dict:
    """The ``[transport]`` table of an HPCC config (``get`` reads a key and marks it used)."""
    mode = 1
    e = get("CC_MODE")
    if e is not None:
        mode = h._int(cpath, e)
    if mode not in (1, 7, 8):
        name = h.CC_NAMES.get(mode, "unknown")
        msg = f"CC_MODE {mode} ({name}) is not supported; braid models DCQCN (1), TIMELY (7) and DCTCP (8)"
        if cc_fallback is None:
            raise h.HpccImportError(msg + "; pass --cc-fallback dcqcn (or none) to import it with DCQCN (or no congestion control)")
        notes.append(f"{msg}: imported with transport.kind = {cc_fallback!r} (--cc-fallback)")
        kind = cc_fallback
    elif mode != 1:
        # TIMELY and DCTCP: an RC QP with another controller (transport.cc, crates/braid-sim/src/cc/).
        kind = "dcqcn"
    else:
        kind = "dcqcn" if qcn else "none"
        if not qcn:
            notes.append("ENABLE_QCN 0 → no ECN marking, so DCQCN never reacts: transport.kind = \"none\" (line rate)")
    transport: dict = {"kind": kind}
    if mode in (7, 8):
        transport["cc"] = _other_cc(h, mode, cpath, get, ignored, notes)
    elif get("DCTCP_RATE_AI") is not None:
        ignored.append(("DCTCP_RATE_AI", "DCTCP-only (CC_MODE 8)"))
    dc: dict = {}
    for key, name, conv in (
        ("ALPHA_RESUME_INTERVAL", "alpha_timer", "us"),
        ("RATE_DECREASE_INTERVAL", "rate_decrease_interval", "us"),
        ("RP_TIMER", "rate_timer", "us"),
        ("EWMA_GAIN", "g", "float"),
        ("FAST_RECOVERY_TIMES", "fast_recovery_steps", "int"),
        ("RATE_AI", "rate_ai", "rate"),
        ("RATE_HAI", "rate_hai", "rate"),
        ("MIN_RATE", "min_rate", "rate"),
        ("CLAMP_TARGET_RATE", "clamp_target_rate", "flag"),
    ):
        e = get(key)
        if e is None:
            continue
        if mode in (7, 8):
            if key not in ("RATE_AI", "MIN_RATE", "EWMA_GAIN"):
                ignored.append((key, f"DCQCN-only (CC_MODE 1); this config runs {h.CC_NAMES[mode]}"))
            continue
        if conv == "us":
            ps = h._us_to_ps(cpath, e)
            if ps <= 0:
                raise h.HpccImportError(f"{h._where(cpath, e)}: must be positive (microseconds)")
            dc[name] = h.fmt_duration(ps)
        elif conv == "float":
            g = h._dec(cpath, e, e.values[0], "a gain in (0, 1]")
            if not 0 < g <= 1:
                raise h.HpccImportError(f"{h._where(cpath, e)}: expected a gain in (0, 1], got {e.values[0]}")
            dc[name] = float(g)
        elif conv == "int":
            dc[name] = h._int(cpath, e)
        elif conv == "rate":
            r = h._rate_bps(cpath, e, e.values[0])
            if r <= 0:
                raise h.HpccImportError(f"{h._where(cpath, e)}: must be positive")
            dc[name] = h.fmt_rate(r)
        else:
            dc[name] = h._flag(cpath, e)
    if (kind == "dcqcn" and mode == 1) or dc:
        dc["byte_counter"] = 0
        notes.append("transport.dcqcn.byte_counter = 0: HPCC's DCQCN increases rate on the timer only (no byte counter)")
        # HPCC's own DCQCN model (rdma-hw.cc, CC_MODE 1), not the paper's reaction point.
        dc["reaction"] = "hpcc"
        dc["notify"] = "ack"
        notes.append(
            'transport.dcqcn.reaction = "hpcc", notify = "ack": HPCC\'s DCQCN model (ECN echoed in every ACK; '
            "the sender cuts at a check every RATE_DECREASE_INTERVAL if a notification came, updates alpha every "
            "ALPHA_RESUME_INTERVAL; the first notification cuts nothing until that check)"
        )
        transport["dcqcn"] = dc

    # ---- settings braid approximates or rejects
    e = get("HAS_WIN")
    has_win = h._flag(cpath, e) if e is not None else False
    for key in ("VAR_WIN", "GLOBAL_T"):
        e = get(key)
        if e is not None:
            h._flag(cpath, e)
            if not has_win:
                ignored.append((key, "windowing is off (HAS_WIN 0)"))
    if has_win and mode in (7, 8):
        ignored.append(("HAS_WIN", f"1: {h.CC_NAMES[mode]} sets its own window (transport.cc)"))
    elif has_win:
        approx("HAS_WIN 1: braid's DCQCN has no sending window (ignored: HAS_WIN, VAR_WIN, GLOBAL_T)")
        ignored.append(("HAS_WIN", "braid's DCQCN has no sending window"))
    else:
        if cfg.get("HAS_WIN") is not None:
            ignored.append(("HAS_WIN", "0: no window, as braid's DCQCN"))
    e = get("RATE_BOUND")
    if e is not None:
        if h._flag(cpath, e):
            ignored.append(("RATE_BOUND", "1: braid always paces each QP at its controller's rate"))
        else:
            approx("RATE_BOUND 0: braid always paces each QP at its DCQCN rate")
    e = get("L2_BACK_TO_ZERO")
    if e is not None:
        if h._flag(cpath, e):
            approx("L2_BACK_TO_ZERO 1 (restart a message from byte 0 on loss): braid does go-back-N from the NAKed PSN")
        else:
            ignored.append(("L2_BACK_TO_ZERO", "0: braid does go-back-N (from the NAKed PSN)"))
    return transport


def _other_cc(h, mode: int, cpath: Path, get, ignored: List[Tuple[str, str]], notes: List[str]) -> dict:
    """``transport.cc`` for HPCC's TIMELY (CC_MODE 7) or DCTCP (CC_MODE 8): the keys HPCC's
    config_doc.txt gives those modes (RATE_AI is "not for DCTCP", DCTCP_RATE_AI DCTCP's own,
    EWMA_GAIN "for DCQCN and DCTCP", MIN_RATE every mode's floor)."""

    def rate(key: str) -> Optional[str]:
        e = get(key)
        if e is None:
            return None
        r = h._rate_bps(cpath, e, e.values[0])
        if r <= 0:
            raise h.HpccImportError(f"{h._where(cpath, e)}: must be positive")
        return h.fmt_rate(r)

    cc: dict = {"kind": "timely" if mode == 7 else "dctcp"}
    if (m := rate("MIN_RATE")) is not None:
        cc["min_rate"] = m
    if mode == 7:
        if (a := rate("RATE_AI")) is not None:
            cc["delta"] = a
        for key in ("DCTCP_RATE_AI", "EWMA_GAIN"):
            if get(key) is not None:
                ignored.append((key, "not used by TIMELY (CC_MODE 7)"))
        notes.append("CC_MODE 7 → transport.cc = { kind = \"timely\" }: RATE_AI is its additive step delta; "
                     "T_low, T_high, beta and alpha are the TIMELY paper's (HPCC's config has no keys for them)")
    else:
        if (a := rate("DCTCP_RATE_AI")) is not None:
            cc["rate_ai"] = a
        e = get("EWMA_GAIN")
        if e is not None:
            g = h._dec(cpath, e, e.values[0], "a gain in (0, 1]")
            if not 0 < g <= 1:
                raise h.HpccImportError(f"{h._where(cpath, e)}: expected a gain in (0, 1], got {e.values[0]}")
            cc["g"] = float(g)
        if get("RATE_AI") is not None:
            ignored.append(("RATE_AI", "not for DCTCP (CC_MODE 8; DCTCP_RATE_AI is its step)"))
        notes.append("CC_MODE 8 → transport.cc = { kind = \"dctcp\" }: the ECN-fraction window, paced at window / base RTT")
    if mode == 7 and get("ENABLE_QCN") is not None:
        notes.append("TIMELY reads RTTs, not ECN: ENABLE_QCN only sets the switches' marking")
    return cc
