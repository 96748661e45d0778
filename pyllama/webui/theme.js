// Light and dark: "system" follows prefers-color-scheme (style.css); the header's button
// cycles system -> light -> dark, remembered in localStorage.

const STORAGE = 'pyllama.theme';
const ORDER = ['system', 'light', 'dark'];
const ICONS = { system: '\u25d0', light: '\u2600', dark: '\u263e' };

export function currentTheme(fallback = 'system') {
  const saved = localStorage.getItem(STORAGE);
  return ORDER.includes(saved) ? saved : fallback;
}

export function applyTheme(theme, button) {
  if (theme === 'system') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = theme;
  if (button) {
    button.textContent = ICONS[theme];
    button.title = `Theme: ${theme}`;
  }
}

export function cycleTheme(button, fallback) {
  const next = ORDER[(ORDER.indexOf(currentTheme(fallback)) + 1) % ORDER.length];
  localStorage.setItem(STORAGE, next);
  applyTheme(next, button);
}
