"""``braid import-hpcc``: HPCC ns-3's congestion-control keys → ``[transport]``.

``CC_MODE`` 1 (DCQCN) maps to ``[transport.dcqcn]`` (HPCC's own DCQCN model), 3 (HPCC, with its
INT settings), 7 (TIMELY) and 8 (DCTCP) to ``transport.cc`` (``crates/braid-sim/src/cc/``); other
modes (10, HPCC-PINT) need ``--cc-fallback``.
``h`` is ``braid.hpcc.convert``, whose parsers (from ``config.py``) and error type are used here. Only the format is used, none of HPCC's code.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple

from .rtt import max_base_rtt_ns


def transport(
    h, cpath: Path, cfg, get, qcn: bool, cc_fallback: Optional[str], ignored: List[Tuple[str, str]], notes: List[str], approx, info
) -> dict:
    """The ``[transport]`` table of an HPCC config (``get`` reads a key and marks it used)."""
    mode = 1
    e = get("CC_MODE")
    if e is not None:
        mode = h._int(cpath, e)
    if mode not in (1, 3, 7, 8):
        name = h.CC_NAMES.get(mode, "unknown")
        msg = f"CC_MODE {mode} ({name}) is not supported; braid models DCQCN (1), HPCC (3), TIMELY (7) and DCTCP (8)"
        if cc_fallback is None:
            raise h.HpccImportError(msg + "; pass --cc-fallback dcqcn (or none) to import it with DCQCN (or no congestion control)")
        notes.append(f"{msg}: imported with transport.kind = {cc_fallback!r} (--cc-fallback)")
        kind = cc_fallback
    elif mode != 1:
        # HPCC, TIMELY and DCTCP: an RC QP with another controller (transport.cc, crates/braid-sim/src/cc/).
        kind = "dcqcn"
    else:
        kind = "dcqcn" if qcn else "none"
        if not qcn:
            notes.append("ENABLE_QCN 0 → no ECN marking, so DCQCN never reacts: transport.kind = \"none\" (line rate)")
    transport: dict = {"kind": kind}
    if mode == 3:
        transport["cc"] = _hpcc(h, cpath, get, ignored, notes, approx, info)
    elif mode in (7, 8):
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
        if mode == 3 and key == "RATE_HAI":
            continue  # _hpcc lists it
        if mode in (3, 7, 8):
            if key not in ("RATE_AI", "MIN_RATE", "EWMA_GAIN") or (mode == 3 and key == "EWMA_GAIN"):
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
    if mode == 3:
        # HPCC ns-3's window switches; braid's HPCC always runs the paper's variable window.
        if not has_win:
            approx("HAS_WIN 0: braid's HPCC always limits its window (the paper's W; rate = W / T)")
        ignored.append(("HAS_WIN", "HPCC sets its own window (transport.cc)"))
        e = get("VAR_WIN")
        if e is not None and not h._flag(cpath, e):
            approx("VAR_WIN 0 (a fixed window of one BDP): braid's HPCC varies its window")
    elif has_win and mode in (7, 8):
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


def _rate_of(h, cpath: Path, get, key: str) -> Optional[str]:
    """A rate key's value as braid writes rates, or None when the config does not set it."""
    e = get(key)
    if e is None:
        return None
    r = h._rate_bps(cpath, e, e.values[0])
    if r <= 0:
        raise h.HpccImportError(f"{h._where(cpath, e)}: must be positive")
    return h.fmt_rate(r)


def _other_cc(h, mode: int, cpath: Path, get, ignored: List[Tuple[str, str]], notes: List[str]) -> dict:
    """``transport.cc`` for HPCC's TIMELY (CC_MODE 7) or DCTCP (CC_MODE 8): the keys HPCC's
    config_doc.txt gives those modes (RATE_AI is "not for DCTCP", DCTCP_RATE_AI DCTCP's own,
    EWMA_GAIN "for DCQCN and DCTCP", MIN_RATE every mode's floor)."""

    def rate(key: str) -> Optional[str]:
        return _rate_of(h, cpath, get, key)

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


def _hpcc(h, cpath: Path, get, ignored: List[Tuple[str, str]], notes: List[str], approx, info) -> dict:
    """``transport.cc`` for HPCC (CC_MODE 3) from the keys config_doc.txt gives it: U_TARGET is
    η, MI_THRESH maxStage, RATE_AI the additive step (W_AI = RATE_AI · T), MIN_RATE the floor,
    FAST_REACT whether it reacts per ACK; the INT settings braid's telemetry has no use for are
    listed as ignored, those it cannot honour are approximations (``--lenient``)."""
    cc: dict = {"kind": "hpcc"}

    def rate(key: str) -> Optional[str]:
        return _rate_of(h, cpath, get, key)

    e = get("U_TARGET")
    if e is not None:
        eta = h._dec(cpath, e, e.values[0], "a utilisation in (0, 1]")
        if not 0 < eta <= 1:
            raise h.HpccImportError(f"{h._where(cpath, e)}: expected a utilisation in (0, 1], got {e.values[0]}")
        cc["eta"] = float(eta)
    e = get("MI_THRESH")
    if e is not None:
        stage = h._int(cpath, e)
        if stage < 0:
            raise h.HpccImportError(f"{h._where(cpath, e)}: expected a count >= 0, got {e.values[0]}")
        cc["max_stage"] = stage
    if (a := rate("RATE_AI")) is not None:
        cc["rate_ai"] = a
    if (m := rate("MIN_RATE")) is not None:
        cc["min_rate"] = m
    e = get("FAST_REACT")
    if e is not None:
        cc["fast_react"] = bool(h._flag(cpath, e))
    if get("RATE_HAI") is not None:
        ignored.append(("RATE_HAI", "braid's HPCC follows the paper: after maxStage additive rounds its step is multiplicative (Wc·η/U)"))
    for key in ("DCTCP_RATE_AI",):
        if get(key) is not None:
            ignored.append((key, "not used by HPCC (CC_MODE 3)"))
    e = get("INT_MULTI")
    if e is not None:
        h._int(cpath, e)
        ignored.append(("INT_MULTI", "braid's INT records are exact byte counts (the multiplier only scales HPCC's header fields)"))
    e = get("MULTI_RATE")
    if e is not None:
        if h._flag(cpath, e):
            approx("MULTI_RATE 1 (one rate per hop): braid's HPCC keeps one window for the path")
        else:
            ignored.append(("MULTI_RATE", "0: one rate for all hops, as braid's HPCC"))
    e = get("SAMPLE_FEEDBACK")
    if e is not None:
        if h._flag(cpath, e):
            approx("SAMPLE_FEEDBACK 1 (INT once per RTT or when a queue is seen): braid echoes INT in every ACK")
        else:
            ignored.append(("SAMPLE_FEEDBACK", "0: INT in every ACK, as braid"))
    e = get("GLOBAL_T")
    if e is None or h._flag(cpath, e):  # HPCC ns-3's default is 1
        p = get("PACKET_PAYLOAD_SIZE")
        payload = h._int(cpath, p) if p is not None else 1000  # HPCC ns-3's default payload
        t_ns = max_base_rtt_ns(info.hosts, info.switches, info.links, payload)
        if t_ns > 0:
            cc["base_rtt"] = f"{t_ns}ns"
            notes.append(f"GLOBAL_T 1 → transport.cc.base_rtt = \"{t_ns}ns\": one T for every flow, the topology's largest "
                         "base RTT as HPCC ns-3 computes it (twice the links' delays plus one payload's serialization per link)")
    else:
        notes.append("GLOBAL_T 0 (T = each pair's base RTT): braid's HPCC takes T as the least RTT each QP samples")
    notes.append("CC_MODE 3 → transport.cc = { kind = \"hpcc\" }: switches stamp INT on data packets, receivers echo it; "
                 "eta, max_stage, rate_ai, min_rate and fast_react from U_TARGET, MI_THRESH, RATE_AI, MIN_RATE, FAST_REACT")
    return cc
