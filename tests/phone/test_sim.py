"""The simulated phone: every action of the grammar does something sensible (or reports that it did nothing), apps
keep state, screens draw at any size with the same elements, and the phone is deterministic."""

from __future__ import annotations

import hashlib

import pytest

from workbench.phone.actions import parse_action
from workbench.phone.openautoglm import HOME
from workbench.phone.sim import SimPhone
from workbench.phone.state import CONTACTS, SONGS, PhoneState
from workbench.phone.tasks import centre


def act(phone: SimPhone, text: str):
    return phone.execute(parse_action(text))


def tap(phone: SimPhone, label: str, kind: str = "Tap"):
    x, y = centre(phone.screen().elements[label])
    return act(phone, f'do(action="{kind}", element=[{x},{y}])')


def launch(app: str) -> SimPhone:
    phone = SimPhone((112, 252))
    assert act(phone, f'do(action="Launch", app="{app}")').valid
    return phone


def test_tap_hits_an_element_or_nothing():
    phone = SimPhone((112, 252))
    hit = tap(phone, "Settings")
    assert hit.valid and hit.element == "Settings" and phone.app == "Settings"
    assert phone.current_app() == "AndroidSystemSettings"  # the runtime's first name for com.android.settings
    assert hit.box == (50, 260, 245, 365)
    miss = act(phone, 'do(action="Tap", element=[500,990])')  # below the last Settings row
    assert not miss.valid and "hit no element" in miss.effect and phone.app == "Settings"


def test_settings_toggles_and_sub_pages_change_state():
    phone = launch("Settings")
    assert tap(phone, "Wi-Fi").effect == "turned Wi-Fi off" and phone.state.toggles["wifi"] is False
    tap(phone, "Display")
    assert "Dark mode" in phone.screen().elements and "Wi-Fi" not in phone.screen().elements
    tap(phone, "Dark mode")
    assert phone.state.toggles["dark_mode"] is True
    assert phone.screen().background != launch("Settings").screen().background  # dark mode is drawn dark
    assert act(phone, 'do(action="Back")').effect == "went back one page"
    assert "Wi-Fi" in phone.screen().elements


def test_type_needs_a_focused_field_and_send_delivers_it():
    phone = launch("Telegram")
    tap(phone, "Mom")
    typed = act(phone, 'do(action="Type", text="hi")')
    assert not typed.valid and "no text field is focused" in typed.effect
    empty_send = tap(phone, "Send")
    assert not empty_send.valid and phone.state.threads["Mom"] == [("them", "Call me when you land")]
    tap(phone, "Message box")
    assert phone.focus == "chat"
    assert act(phone, 'do(action="Type", text="first")').valid
    assert act(phone, 'do(action="Type", text="On my way")').valid  # Type replaces the field's text
    tap(phone, "Send")
    assert phone.state.threads["Mom"][-1] == ("me", "On my way")


def test_swipe_scrolls_a_long_list_until_its_end():
    phone = launch("Contacts")
    last = CONTACTS[-1]
    assert last not in phone.screen().elements
    swipes = 0
    while last not in phone.screen().elements:
        assert act(phone, 'do(action="Swipe", start=[500,800], end=[500,300])').valid
        swipes += 1
    assert swipes >= 2
    at_end = act(phone, 'do(action="Swipe", start=[500,800], end=[500,300])')
    assert not at_end.valid and "end" in at_end.effect
    assert act(phone, 'do(action="Swipe", start=[500,300], end=[500,800])').valid  # back up
    assert not act(phone, 'do(action="Swipe", start=[500,300], end=[510,320])').valid  # too short


def test_home_screen_has_two_pages_turned_by_horizontal_swipes():
    phone = SimPhone((112, 252))
    assert "RetroMusic" not in phone.screen().elements
    assert not act(phone, 'do(action="Swipe", start=[200,600], end=[800,600])').valid  # no page before the first
    assert act(phone, 'do(action="Swipe", start=[800,600], end=[200,600])').effect == "turned to home page 2"
    assert "RetroMusic" in phone.screen().elements
    assert not act(phone, 'do(action="Swipe", start=[800,600], end=[200,600])').valid
    settings = launch("Settings")
    assert not act(settings, 'do(action="Swipe", start=[800,600], end=[200,600])').valid


def test_long_press_opens_a_menu_and_double_tap_likes_a_photo():
    phone = launch("Contacts")
    assert tap(phone, "Alice Chen", "Double Tap").valid and phone.stack[-1].arg == "Alice Chen"  # no double-tap: a tap
    phone = launch("Contacts")
    pressed = tap(phone, "Alice Chen", "Long Press")
    assert pressed.valid and set(phone.screen().elements) == {"Add to favorites", "Open contact"}
    tap(phone, "Add to favorites")
    assert "Alice Chen" in phone.state.favorites and phone.menu is None
    tap(phone, "Alice Chen", "Long Press")
    assert act(phone, 'do(action="Back")').effect == "closed the menu"
    assert not tap(launch("Settings"), "Wi-Fi", "Long Press").valid  # nothing to long-press on a switch

    photos = launch("Files")
    tap(photos, "Cat")
    assert not tap(photos, "Photo").valid  # one tap on the photo does nothing
    assert tap(photos, "Photo", "Double Tap").valid and photos.state.liked_photos == {"Cat"}


def test_music_plays_and_long_press_likes_without_playing():
    phone = launch("RetroMusic")
    title = SONGS[2].split(" - ")[0]
    tap(phone, title, "Long Press")
    tap(phone, "Like song")
    assert phone.state.liked_songs == {SONGS[2]} and phone.state.now_playing is None
    tap(phone, title)
    assert phone.state.now_playing == SONGS[2] and phone.state.playing
    tap(phone, "Pause")
    assert not phone.state.playing


def test_browser_search_and_results():
    phone = launch("Chrome")
    assert not tap(phone, "Go").valid  # nothing typed
    tap(phone, "Search box")
    act(phone, 'do(action="Type", text="pasta recipe")')
    tap(phone, "Go")
    assert phone.state.searches == ["pasta recipe"] and phone.stack[-1].kind == "results"
    tap(phone, "Easy tomato pasta recipe")
    assert phone.state.read_pages == ["Easy tomato pasta recipe"] and phone.stack[-1].kind == "article"


def test_back_closes_keyboard_then_page_then_app_then_does_nothing():
    phone = launch("Telegram")
    tap(phone, "Mom")
    tap(phone, "Message box")
    effects = [act(phone, 'do(action="Back")').effect for _ in range(3)]
    assert effects == ["closed the keyboard", "went back one page", "went back to the home screen"]
    assert phone.current_app() == HOME
    assert not act(phone, 'do(action="Back")').valid


def test_home_launch_and_wait():
    phone = launch("Files")
    assert act(phone, 'do(action="Home")').valid and phone.current_app() == HOME
    # Launch takes a name of Open-AutoGLM's app table, exactly: another name of the same package opens the app too
    assert act(phone, 'do(action="Launch", app="Android System Settings")').valid and phone.app == "Settings"
    assert act(phone, 'do(action="Launch", app="Google Chrome")').valid and phone.current_app() == "Chrome"
    for unknown in ("settings ", "Photos", "相册", "Tiktok"):  # not a name of the table, or not installed
        outcome = act(phone, f'do(action="Launch", app="{unknown}")')
        assert not outcome.valid and "App not found" in outcome.effect and phone.app == "Chrome", unknown
    before = phone.screenshot()
    assert act(phone, 'do(action="Wait", duration="2 seconds")').valid
    assert phone.screenshot().tobytes() == before.tobytes()


@pytest.mark.parametrize("size", [(112, 252), (1080, 2400), (720, 1600)])
def test_screens_draw_at_any_size(size):
    phone = launch("Contacts")
    image = phone.screenshot(size)
    assert image.size == size and image.mode == "RGB"
    x1, y1, x2, y2 = phone.screen().elements["Alice Chen"]  # the element is drawn where its box says
    w, h = size
    assert image.getpixel((int((x1 + 10) * w / 1000), int((y1 + y2) / 2 * h / 1000))) != image.getpixel((2, h - 2))


def test_the_phone_is_deterministic():
    def run() -> str:
        phone = SimPhone((112, 252))
        phone.reset(PhoneState())
        digest = hashlib.sha256()
        for text in [
            'do(action="Launch", app="RetroMusic")',
            'do(action="Swipe", start=[500,800], end=[500,300])',
            'do(action="Tap", element=[500,500])',
        ]:
            act(phone, text)
            digest.update(phone.screenshot().tobytes())
        return digest.hexdigest()

    assert run() == run()
