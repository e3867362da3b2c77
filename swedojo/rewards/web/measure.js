(opts) => {
  const out = { violations: [], texts: [], frames: [], doc: {} };
  const flag = (group, where, detail) => out.violations.push({ group, where, detail });
  const name = (el) => {
    let s = el.tagName.toLowerCase();
    if (el.id) return `${s}#${el.id}`;
    if (el.classList.length) s += "." + [...el.classList].join(".");
    const parent = el.parentElement;
    if (parent) {
      const same = [...parent.children].filter((c) => c.tagName === el.tagName);
      if (same.length > 1) s += `:nth-of-type(${same.indexOf(el) + 1})`;
    }
    return s;
  };
  const path = (el) => {
    const parts = [];
    for (let e = el; e && e !== document.body && parts.length < 4; e = e.parentElement) parts.unshift(name(e));
    return parts.join(" > ");
  };
  const page = (r) => ({ x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height });
  const inside = (a, b, slack = 1) => a.x >= b.x - slack && a.y >= b.y - slack && a.x + a.w <= b.x + b.w + slack && a.y + a.h <= b.y + b.h + slack;
  const alpha = (color) => { const m = color.match(/rgba?\(([^)]*)\)/); if (!m) return 1; const p = m[1].split(/[ ,/]+/).filter(Boolean); return p.length > 3 ? parseFloat(p[3]) : 1; };
  const root = document.scrollingElement || document.documentElement;
  const W = innerWidth, H = innerHeight;
  out.doc = { width: root.scrollWidth, height: root.scrollHeight, viewport: [W, H] };
  if (root.scrollWidth > W + 1) flag("no_horizontal_scroll", "document", `${root.scrollWidth}px wide in a ${W}px window`);
  const frameEls = opts.frames ? [...document.querySelectorAll(opts.frames)] : [];
  const frames = frameEls.length ? frameEls.map((el) => ({ el, box: page(el.getBoundingClientRect()) }))
                                 : [{ el: null, box: { x: 0, y: 0, w: Math.max(root.scrollWidth, W), h: Math.max(root.scrollHeight, H) } }];
  if (opts.frames && !frameEls.length) flag("frames", opts.frames, "no frame on the page");
  for (const f of frames) {
    out.frames.push({ where: f.el ? path(f.el) : "page", ...f.box });
    if (!f.el) continue;
    const where = path(f.el);
    if (opts.aspect && Math.abs(f.box.w / f.box.h - opts.aspect) > opts.aspect * 0.01)
      flag("frames", where, `aspect ratio ${(f.box.w / f.box.h).toFixed(3)}, ${opts.aspect.toFixed(3)} required`);
    if (f.box.w > W + 1 || f.box.x < -1) flag("frames", where, `${f.box.w}px wide at x=${f.box.x} in a ${W}px window`);
    if (f.el.scrollHeight > f.el.clientHeight + 1 || f.el.scrollWidth > f.el.clientWidth + 1)
      flag("content_fits", where, `content ${f.el.scrollWidth}x${f.el.scrollHeight} in a ${f.el.clientWidth}x${f.el.clientHeight} frame`);
    for (const child of f.el.querySelectorAll("*")) {
      const box = page(child.getBoundingClientRect());
      if (box.w > 0 && box.h > 0 && !inside(box, f.box)) flag("content_fits", path(child), `outside its frame ${where}`);
    }
  }
  const frameOf = (el) => { const f = opts.frames && el.closest(opts.frames); return frames.find((x) => x.el === f) || frames[0]; };
  const mayHide = opts.may_hide.length ? opts.may_hide.join(",") : null;
  const skip = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "TITLE", "OPTION", "TEXTAREA", "HEAD"]);
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const range = document.createRange();
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.data.trim();
    const el = node.parentElement;
    if (!text || !el || skip.has(el.tagName) || (mayHide && el.closest(mayHide))) continue;
    const where = `${path(el)}: "${text.slice(0, 40)}"`;
    range.selectNodeContents(node);
    const rects = [...range.getClientRects()].filter((r) => r.width > 0.5 && r.height > 0.5).map(page);
    if (!rects.length) { flag("text_visible", where, "not rendered (display: none, zero size or collapsed)"); continue; }
    const cs = getComputedStyle(el);
    if (cs.visibility !== "visible") flag("text_visible", where, `visibility: ${cs.visibility}`);
    if (alpha(cs.color) < 0.1 || alpha(cs.webkitTextFillColor || cs.color) < 0.1) flag("text_visible", where, "transparent text colour");
    for (let a = el; a; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (parseFloat(s.opacity) < 0.1) { flag("text_visible", where, `opacity ${s.opacity} on ${path(a)}`); break; }
    }
    const size = parseFloat(cs.fontSize);
    if (size < opts.min_font) flag("font_size", where, `${size}px, at least ${opts.min_font}px required`);
    if (cs.lineHeight !== "normal" && parseFloat(cs.lineHeight) < 0.95 * size) flag("spacing", where, `line height ${cs.lineHeight} under the font size ${size}px`);
    if (cs.letterSpacing !== "normal" && parseFloat(cs.letterSpacing) < -0.05 * size) flag("spacing", where, `letter spacing ${cs.letterSpacing}`);
    for (let a = el; a && a !== document.documentElement; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (s.textOverflow !== "clip" && s.overflowX !== "visible" && a.scrollWidth > a.clientWidth + 1) {
        flag("text_not_clipped", where, `cut by text-overflow: ${s.textOverflow} on ${path(a)}`);
        break;
      }
    }
    const frame = frameOf(el);
    for (const r of rects) {
      if (r.x < -1 || r.y < -1 || r.x + r.w > Math.max(root.scrollWidth, W) + 1) { flag("text_on_screen", where, `at x=${Math.round(r.x)} y=${Math.round(r.y)}, off the page`); break; }
      if (frame.el && !inside(r, frame.box)) { flag("text_on_screen", where, `outside its frame ${path(frame.el)}`); break; }
      let clipped = null;
      for (let a = el; a && a !== document.documentElement && !clipped; a = a.parentElement) {
        const s = getComputedStyle(a);
        if (s.clipPath !== "none" || (s.clip && s.clip !== "auto")) clipped = `clip on ${path(a)}`;
        else if (s.overflowX !== "visible" || s.overflowY !== "visible") {
          const b = a.getBoundingClientRect();
          const box = page({ left: b.left + a.clientLeft, top: b.top + a.clientTop, width: a.clientWidth, height: a.clientHeight });
          if (!inside(r, box)) clipped = `overflow: ${s.overflowX} ${s.overflowY} on ${path(a)}`;
        }
      }
      if (clipped) { flag("text_not_clipped", where, `cut by ${clipped}`); break; }
    }
    out.texts.push({ where, el: path(el), rects, font_px: size, bold: parseInt(cs.fontWeight, 10) >= 600 });
  }
  for (let i = 0; i < out.texts.length; i++) {
    for (let j = i + 1; j < out.texts.length; j++) {
      const a = out.texts[i], b = out.texts[j];
      if (a.el === b.el) continue;
      for (const r of a.rects) for (const q of b.rects) {
        const dx = Math.min(r.x + r.w, q.x + q.w) - Math.max(r.x, q.x), dy = Math.min(r.y + r.h, q.y + q.h) - Math.max(r.y, q.y);
        if (dx > 1 && dy > 0.25 * Math.min(r.h, q.h)) { flag("spacing", a.where, `overlaps ${b.where}`); }
      }
    }
  }
  for (const [selector, gap] of Object.entries(opts.gaps)) {
    const boxes = [...document.querySelectorAll(selector)].map((el) => ({ where: path(el), ...page(el.getBoundingClientRect()) })).filter((b) => b.w > 0);
    for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i], b = boxes[j];
      const dx = Math.max(0, b.x - (a.x + a.w), a.x - (b.x + b.w)), dy = Math.max(0, b.y - (a.y + a.h), a.y - (b.y + b.h));
      const apart = Math.max(dx, dy);
      if (apart < gap - 0.5) flag("spacing", `${a.where} / ${b.where}`, apart === 0 ? "overlap" : `${apart.toFixed(1)}px apart, ${gap}px required`);
    }
  }
  for (const img of document.images) {
    if (!img.complete || img.naturalWidth === 0) flag("images", path(img), `broken image ${img.getAttribute("src")}`);
  }
  const pictures = [...document.querySelectorAll("img, canvas, video, svg")].filter((e) => !e.parentElement.closest("svg"));
  for (const f of frames) {
    let area = 0;
    for (const p of pictures) {
      const r = page(p.getBoundingClientRect());
      const dx = Math.min(r.x + r.w, f.box.x + f.box.w) - Math.max(r.x, f.box.x), dy = Math.min(r.y + r.h, f.box.y + f.box.h) - Math.max(r.y, f.box.y);
      if (dx > 0 && dy > 0) area += dx * dy;
    }
    const share = area / (f.box.w * f.box.h);
    if (share > opts.max_image_area) flag("images", f.el ? path(f.el) : "page", `images cover ${(share * 100).toFixed(0)}% of it, at most ${(opts.max_image_area * 100).toFixed(0)}%`);
  }
  return out;
}
