"""The photo album (Files): a grid of photos, three a row; a photo opened (a double tap or Like likes it)."""

from __future__ import annotations

from ..screen import Screen
from ..state import PHOTOS_APP
from .common import PHOTO_COLORS, RED, WHITE, App, AppHost, Page, Theme, title_bar

GRID_COLUMNS = 3
TILE_LEFT, TILE_TOP = 30, 170  # the first tile's top left
TILE_SIZE, TILE_PITCH = (300, 150), (320, 200)  # a tile; from one tile to the next across and down
PHOTO = (40, 170, 960, 760)  # the photo opened
LIKE_BUTTON = (350, 800, 650, 880)


def like_photo(phone: AppHost, name: str, on: bool) -> str:
    (phone.state.liked_photos.add if on else phone.state.liked_photos.discard)(name)
    return f"{'liked' if on else 'unliked'} the photo {name}"


def _photo(phone: AppHost, s: Screen, name: str, t: Theme) -> None:
    title_bar(phone, s, t, name, back=True)
    liked = name in phone.state.liked_photos
    colour = PHOTO_COLORS[phone.state.contents.photos.index(name) % len(PHOTO_COLORS)]
    s.rect(PHOTO, colour, radius=10, element="Photo", double_tap=lambda: like_photo(phone, name, not liked))
    s.text((500, 465), name, 48, WHITE, anchor="mm")
    s.rect(
        LIKE_BUTTON,
        t.card,
        radius=40,
        outline=t.line,
        element="Unlike" if liked else "Like",
        tap=lambda: like_photo(phone, name, not liked),
    )
    s.text((500, 840), "Liked" if liked else "Like", 28, RED if liked else t.fg, anchor="mm")
    s.text((500, 930), "Double tap the photo to like it", 20, t.sub, anchor="mm")


def draw(phone: AppHost, s: Screen, page: Page, t: Theme) -> None:
    if page.kind == "photo":
        _photo(phone, s, page.arg, t)
        return
    title_bar(phone, s, t, PHOTOS_APP, back=False)
    for i, name in enumerate(phone.state.contents.photos):
        col, row = i % GRID_COLUMNS, i // GRID_COLUMNS
        x, y = TILE_LEFT + col * TILE_PITCH[0], TILE_TOP + row * TILE_PITCH[1]
        s.rect(
            (x, y, x + TILE_SIZE[0], y + TILE_SIZE[1]),
            PHOTO_COLORS[i % len(PHOTO_COLORS)],
            radius=8,
            element=name,
            tap=lambda n=name: phone.push(Page("photo", n)),
        )
        s.text((x + 150, y + 170), name, 22, t.fg, anchor="mm")
        if name in phone.state.liked_photos:
            s.text((x + 280, y + 20), "Liked", 18, RED, anchor="ra")


APP = App(draw)
