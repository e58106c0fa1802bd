// An axe-style check of the page as it is drawn, run by the browser tests
// through chromedp: every control has an accessible name, every picture
// that means something has one too, and every piece of visible text has a
// contrast of at least 4.5:1 (3:1 when large) against what is behind it,
// computed from the computed colours. It answers JSON:
// {problems: [...], controls: N, texts: N, skipped: N}.
(() => {
  const problems = [];
  const clean = (s) => (s || '').replace(/\s+/g, ' ').trim();
  const shown = (el) => el.checkVisibility({ opacityProperty: true, visibilityProperty: true }) && el.getClientRects().length > 0;
  const where = (el) => {
    let s = el.tagName.toLowerCase();
    if (el.id) s += `#${el.id}`;
    const cls = el.getAttribute('class');
    if (cls) s += `.${cls.trim().split(/\s+/).join('.')}`;
    const label = clean(el.textContent).slice(0, 40);
    return label ? `${s} "${label}"` : s;
  };

  // The accessible name, as far as this page's markup needs it.
  function name(el) {
    const by = el.getAttribute('aria-labelledby');
    if (by) {
      const t = clean(by.split(/\s+/).map((id) => (document.getElementById(id) || {}).textContent || '').join(' '));
      if (t) return t;
    }
    if (clean(el.getAttribute('aria-label'))) return clean(el.getAttribute('aria-label'));
    if (el.labels && el.labels.length) {
      const t = clean([...el.labels].map((l) => l.textContent).join(' '));
      if (t) return t;
    }
    const tag = el.tagName;
    if ((tag === 'BUTTON' || tag === 'A' || tag === 'SUMMARY' || el.getAttribute('role') === 'button') && clean(el.textContent)) return clean(el.textContent);
    if (tag === 'INPUT' && ['submit', 'button', 'reset'].includes(el.type) && clean(el.value)) return clean(el.value);
    if (tag === 'IMG' && clean(el.getAttribute('alt'))) return clean(el.getAttribute('alt'));
    if (clean(el.getAttribute('title'))) return clean(el.getAttribute('title'));
    return '';
  }

  let controls = 0;
  for (const el of document.querySelectorAll('input:not([type=hidden]), select, textarea, button, a[href], summary, [role=button], [role=img], img')) {
    if (!shown(el) || el.closest('[aria-hidden="true"]')) continue;
    controls++;
    if (el.tagName === 'IMG' && el.getAttribute('alt') === '') continue; // decorative, said so
    if (!name(el)) problems.push(`no accessible name: ${where(el)}`);
  }
  for (const el of document.querySelectorAll('svg')) {
    if (el.parentElement.closest('svg') || el.closest('[aria-hidden="true"]') || !shown(el)) continue;
    controls++;
    const title = el.querySelector(':scope > title');
    if (!clean(el.getAttribute('aria-label')) && !clean(el.getAttribute('aria-labelledby')) && !(title && clean(title.textContent))) {
      problems.push(`svg without a title or aria-label (or aria-hidden="true" if it only decorates): ${where(el)}`);
    }
  }

  // ---- contrast ----

  function rgba(c) {
    const m = /^rgba?\(([^)]+)\)$/.exec(c);
    if (!m) return null;
    const p = m[1].split(/[\s,/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  }
  const over = (top, under) => [0, 1, 2].map((i) => top[i] * top[3] + under[i] * (1 - top[3])).concat(1);
  function luminance(c) {
    const [r, g, b] = c.slice(0, 3).map((v) => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  }
  const ratio = (a, b) => {
    const [x, y] = [luminance(a), luminance(b)].sort((p, q) => q - p);
    return (x + 0.05) / (y + 0.05);
  };
  // The canvas under the page: the scheme's, when nothing paints the root.
  const canvas = matchMedia('(prefers-color-scheme: dark)').matches && getComputedStyle(document.documentElement).colorScheme.includes('dark') ? [18, 18, 18, 1] : [255, 255, 255, 1];

  // background composes the backgrounds from el up to the first opaque
  // one; null when an image or gradient is in the way (not judged).
  function background(el) {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const cs = getComputedStyle(e);
      if (cs.backgroundImage !== 'none') return null;
      const c = rgba(cs.backgroundColor);
      if (!c) return null;
      if (c[3] > 0) {
        layers.push(c);
        if (c[3] >= 1) break;
      }
    }
    let out = canvas;
    for (const c of layers.reverse()) out = over(c, out);
    return out;
  }

  let texts = 0;
  let skipped = 0;
  const seen = new Set();
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    const el = n.parentElement;
    if (!el || seen.has(el) || !clean(n.data)) continue;
    if (el.closest('script, style, template, option, title, [disabled]')) continue;
    if (!shown(el)) continue;
    const range = document.createRange();
    range.selectNodeContents(n);
    if (![...range.getClientRects()].some((r) => r.width > 0 && r.height > 0)) continue;
    seen.add(el);
    const cs = getComputedStyle(el);
    let fg = rgba(el.closest('svg') ? cs.fill : cs.color);
    const bg = background(el);
    if (!fg || !bg) {
      skipped++;
      continue;
    }
    let opacity = 1;
    for (let e = el; e; e = e.parentElement) opacity *= Number(getComputedStyle(e).opacity);
    fg = over([fg[0], fg[1], fg[2], fg[3] * opacity], bg);
    texts++;
    const size = parseFloat(cs.fontSize);
    const large = size >= 24 || (size >= 18.66 && Number(cs.fontWeight) >= 700);
    const need = large ? 3 : 4.5;
    const r = ratio(fg, bg);
    if (r < need) problems.push(`contrast ${r.toFixed(2)}:1 < ${need}:1 for ${where(el)} (${cs.color} on rgb(${bg.slice(0, 3).map(Math.round).join(', ')}))`);
  }
  return JSON.stringify({ problems, controls, texts, skipped });
})()
