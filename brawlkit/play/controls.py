"""Keyboard and gamepad → one controller state (stick x/y in [-1, 1], ``BP_BTN_*`` bits).

Why a table: the keys are declared once here and docs/play.md lists the same table;
the stick convention is the simulation's (``stick_y`` +1 = up: up-special, ledge
climb; -1 = down: fast fall, drop from the ledge).  A gamepad, when one is plugged in,
is read every frame and combined with the keyboard (the larger stick deflection
wins, buttons are OR-ed), so either can be used at any time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pygame

from brawlkit.wire.constants import C

#: stick directions: key → (dx, dy)
STICK_KEYS: dict[int, tuple[int, int]] = {
    pygame.K_LEFT: (-1, 0), pygame.K_a: (-1, 0),
    pygame.K_RIGHT: (1, 0), pygame.K_d: (1, 0),
    pygame.K_UP: (0, 1), pygame.K_w: (0, 1),
    pygame.K_DOWN: (0, -1), pygame.K_s: (0, -1),
}
#: button bit → keys
BUTTON_KEYS: dict[int, tuple[int, ...]] = {
    C.BP_BTN_JUMP: (pygame.K_SPACE, pygame.K_j),
    C.BP_BTN_ATTACK: (pygame.K_k, pygame.K_x),
    C.BP_BTN_SPECIAL: (pygame.K_l, pygame.K_c),
    C.BP_BTN_SHIELD: (pygame.K_LSHIFT, pygame.K_RSHIFT, pygame.K_SEMICOLON),
}
#: a walk instead of a full tilt while held (stick magnitude 0.5)
WALK_KEYS = (pygame.K_LCTRL, pygame.K_RCTRL)

#: gamepad (SDL's usual layout: 0 A, 1 B, 2 X, 3 Y, 4 LB, 5 RB) button → bit
PAD_BUTTONS: dict[int, int] = {
    0: C.BP_BTN_JUMP, 3: C.BP_BTN_JUMP,
    2: C.BP_BTN_ATTACK,
    1: C.BP_BTN_SPECIAL,
    4: C.BP_BTN_SHIELD, 5: C.BP_BTN_SHIELD,
}
#: gamepad Start: what R does on the keyboard (play again / look for another arena)
PAD_START = 7
#: analog triggers past this (axes 4 and 5 on most pads) hold the shield
TRIGGER_AXES, TRIGGER_ON = (4, 5), 0.5
DEADZONE = 0.2


def keyboard(pressed: Sequence[bool] | Any) -> tuple[float, float, int]:
    """Controller state from ``pygame.key.get_pressed()`` (anything indexable by key)."""
    sx = sy = 0
    for key, (dx, dy) in STICK_KEYS.items():
        if pressed[key]:
            sx, sy = sx + dx, sy + dy
    sx, sy = max(-1, min(1, sx)), max(-1, min(1, sy))
    scale = 0.5 if any(pressed[k] for k in WALK_KEYS) else 1.0
    buttons = 0
    for bit, keys in BUTTON_KEYS.items():
        if any(pressed[k] for k in keys):
            buttons |= bit
    return sx * scale, sy * scale, buttons


def _dead(v: float) -> float:
    return 0.0 if abs(v) < DEADZONE else max(-1.0, min(1.0, v))


def gamepad(js: Any) -> tuple[float, float, int]:
    """Controller state of a ``pygame.joystick.Joystick``: left stick or d-pad (hat 0),
    screen y down → stick y up."""
    sx = _dead(js.get_axis(0)) if js.get_numaxes() > 0 else 0.0
    sy = -_dead(js.get_axis(1)) if js.get_numaxes() > 1 else 0.0
    if js.get_numhats() > 0:
        hx, hy = js.get_hat(0)
        if hx or hy:
            sx, sy = float(hx), float(hy)
    buttons = 0
    for idx, bit in PAD_BUTTONS.items():
        if idx < js.get_numbuttons() and js.get_button(idx):
            buttons |= bit
    for ax in TRIGGER_AXES:
        if ax < js.get_numaxes() and js.get_axis(ax) > TRIGGER_ON:
            buttons |= C.BP_BTN_SHIELD
    return sx, sy, buttons


def combine(*states: tuple[float, float, int]) -> tuple[float, float, int]:
    """Several controllers as one: per axis the largest deflection, buttons OR-ed."""
    sx = sy = 0.0
    buttons = 0
    for x, y, b in states:
        sx = x if abs(x) > abs(sx) else sx
        sy = y if abs(y) > abs(sy) else sy
        buttons |= b
    return sx, sy, buttons
