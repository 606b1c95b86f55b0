"""Draw the dpstudio icon with QPainter: resources/icon.png (256 px) and icon.ico.

    QT_QPA_PLATFORM=offscreen python packaging/make_icon.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QGuiApplication, QImage, QPainter, QPen

RES = Path(__file__).resolve().parent.parent / "resources"


def draw(size: int = 256) -> QImage:
    img = QImage(size, size, QImage.Format.Format_ARGB32)
    img.fill(Qt.GlobalColor.transparent)
    p = QPainter(img)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    s = size / 256.0
    # rounded tile
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(QBrush(QColor("#0b4f8a")))
    p.drawRoundedRect(QRectF(8 * s, 8 * s, 240 * s, 240 * s), 48 * s, 48 * s)
    # a 4 x 4 grid of records; clusters share a colour (microaggregation)
    colors = ["#ffd400", "#ffd400", "#7fc8ff", "#7fc8ff"]
    for r in range(4):
        for c in range(4):
            col = QColor(colors[(r // 2) * 2 + (c // 2)] if (r + c) % 3 else "#ffffff")
            p.setBrush(QBrush(col))
            x, y = 40 + c * 46, 40 + r * 46
            p.drawEllipse(QPointF((x + 12) * s, (y + 12) * s), 15 * s, 15 * s)
    # the trade-off curve
    pen = QPen(QColor("#ffffff"), 10 * s)
    pen.setCapStyle(Qt.PenCapStyle.RoundCap)
    p.setPen(pen)
    p.setBrush(Qt.BrushStyle.NoBrush)
    p.drawArc(QRectF(70 * s, -70 * s, 240 * s, 240 * s), 180 * 16, 90 * 16)
    p.end()
    return img


def main() -> int:
    app = QGuiApplication.instance() or QGuiApplication(sys.argv)  # noqa: F841
    RES.mkdir(exist_ok=True)
    big = draw(256)
    big.save(str(RES / "icon.png"), "PNG")
    try:  # Windows icon; Qt writes .ico when the imageformats plugin is present
        ok = big.scaled(64, 64, Qt.AspectRatioMode.KeepAspectRatio,
                        Qt.TransformationMode.SmoothTransformation).save(str(RES / "icon.ico"), "ICO")
    except Exception:  # noqa: BLE001
        ok = False
    if not ok:
        try:
            from PIL import Image

            Image.open(RES / "icon.png").save(RES / "icon.ico", sizes=[(16, 16), (32, 32),
                                                                        (64, 64), (256, 256)])
            ok = True
        except Exception:  # noqa: BLE001
            pass
    print("wrote", RES / "icon.png", "and icon.ico" if ok else "(no .ico writer available)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
