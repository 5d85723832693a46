"""The music player (RetroMusic): the library (a row a song, it scrolls; a tap plays the song and opens the player, a
long press opens its menu: Like / Unlike, Play), the mini player under the list while a song is loaded, and the
player (Play / Pause, Like)."""

from __future__ import annotations

from ..screen import Screen
from ..state import MUSIC_APP
from .common import BLUE, LIST_BOTTOM, PHOTO_COLORS, RED, WHITE, App, AppHost, Menu, Page, Theme, list_rows, title_bar

ROW_HEIGHT = 80  # a song's row
MINI_PLAYER_HEIGHT = 90  # the bar under the list while a song is loaded: the list ends above it
COVER = (200, 190, 800, 460)
PLAY_BUTTON = (300, 650, 700, 740)
LIKE_BUTTON = (300, 780, 700, 860)


def play(phone: AppHost, song: str, show: bool = False) -> str:
    phone.state.now_playing, phone.state.playing = song, True
    if show:
        phone.push(Page("player", song))
    return f"playing {song}"


def pause(phone: AppHost) -> str:
    phone.state.playing = False
    return "paused the music"


def like_song(phone: AppHost, song: str, on: bool) -> str:
    (phone.state.liked_songs.add if on else phone.state.liked_songs.discard)(song)
    return f"{'liked' if on else 'unliked'} {song}"


def like_menu(phone: AppHost, song: str) -> str:
    liked = song in phone.state.liked_songs
    phone.menu = Menu(
        song.split(" - ")[0],
        (
            ("Unlike song" if liked else "Like song", lambda p: like_song(p, song, not liked)),
            ("Play", lambda p: play(p, song)),
        ),
    )
    return f"opened the menu of {song}"


def list_bottom(phone: AppHost) -> int:
    """Where the library's list ends: above the mini player while a song is loaded."""
    return LIST_BOTTOM - (MINI_PLAYER_HEIGHT if phone.state.now_playing else 0)


def _player(phone: AppHost, s: Screen, page: Page, t: Theme) -> None:
    song = page.arg
    title, artist = song.split(" - ")
    title_bar(phone, s, t, "Now playing", back=True)
    cover = PHOTO_COLORS[phone.state.contents.songs.index(song) % len(PHOTO_COLORS)]
    s.rect(COVER, cover, radius=30)
    s.text((500, 520), title, 40, t.fg, anchor="mm")
    s.text((500, 575), artist, 28, t.sub, anchor="mm")
    playing = phone.state.playing and phone.state.now_playing == song
    s.rect(
        PLAY_BUTTON,
        BLUE,
        radius=45,
        element="Pause" if playing else "Play",
        tap=lambda: pause(phone) if playing else play(phone, song),
    )
    s.text((500, 695), "Pause" if playing else "Play", 32, WHITE, anchor="mm")
    liked = song in phone.state.liked_songs
    s.rect(
        LIKE_BUTTON,
        t.card,
        radius=40,
        outline=t.line,
        element="Unlike" if liked else "Like",
        tap=lambda: like_song(phone, song, not liked),
    )
    s.text((500, 820), "Liked" if liked else "Like", 28, RED if liked else t.fg, anchor="mm")


def draw(phone: AppHost, s: Screen, page: Page, t: Theme) -> None:
    if page.kind == "player":
        _player(phone, s, page, t)
        return
    bottom = list_bottom(phone)
    songs = phone.state.contents.songs
    for i, y in list_rows(page, len(songs), ROW_HEIGHT, bottom):
        song = songs[i]
        title, artist = song.split(" - ")
        s.rect(
            (20, y + 4, 980, y + 76),
            t.card,
            radius=12,
            element=title,
            tap=lambda so=song: play(phone, so, show=True),
            long_press=lambda so=song: like_menu(phone, so),
        )
        s.text((50, y + 27), title, 28, t.fg, anchor="lm")
        s.text((50, y + 58), artist, 20, t.sub, anchor="lm")
        if song == phone.state.now_playing:
            s.text((940, y + 40), "Playing" if phone.state.playing else "Paused", 22, BLUE, anchor="rm")
    title_bar(phone, s, t, MUSIC_APP, back=False)
    if phone.state.now_playing:
        s.rect((0, bottom, 1000, 1000), t.card)
        s.text((40, bottom + 45), phone.state.now_playing.split(" - ")[0], 28, t.fg, anchor="lm")
        s.text((960, bottom + 45), "Playing" if phone.state.playing else "Paused", 24, t.sub, anchor="rm")


def rows(phone: AppHost, page: Page):
    return (len(phone.state.contents.songs), ROW_HEIGHT, list_bottom(phone)) if page.kind == "root" else None


APP = App(draw, rows)
