(expectation) => {
  const els = [...document.querySelectorAll(expectation.selector)];
  const visible = (el) => el.checkVisibility({ opacityProperty: true, visibilityProperty: true }) && el.getClientRects().length > 0;
  const texts = els.map((el) => (visible(el) ? el.innerText : "").trim());
  const failures = [];
  if (expectation.count !== null && els.length !== expectation.count) failures.push(`${els.length} match, ${expectation.count} expected`);
  if (expectation.text !== null && !texts.join(" ").includes(expectation.text)) failures.push(`text ${JSON.stringify(texts.join(" ").slice(0, 120))} lacks ${JSON.stringify(expectation.text)}`);
  if (expectation.visible === true && (!els.length || !els.every(visible))) failures.push(els.length ? `${els.filter((e) => !visible(e)).length} of ${els.length} not visible` : "none matches");
  if (expectation.visible === false && els.some(visible)) failures.push(`${els.filter(visible).length} visible, none expected`);
  if (expectation.order !== null && JSON.stringify(texts) !== JSON.stringify(expectation.order)) failures.push(`order ${JSON.stringify(texts)}`);
  if (expectation.columns !== null) {
    const lefts = new Set(els.filter(visible).map((el) => Math.round(el.getBoundingClientRect().left)));
    if (lefts.size !== expectation.columns) failures.push(`${lefts.size} columns, ${expectation.columns} expected`);
  }
  return failures;
}
