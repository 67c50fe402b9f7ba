/**
 * The dashboard's style sheet, served as its own resource (`GET /dashboard.css`, from the agent's
 * origin): the server's Content-Security-Policy allows style from 'self' only, neither inline
 * style nor style attributes. System fonts only: a font file would be a request to elsewhere. One
 * palette of CSS variables, light and dark by the reader's preference; the tones good, warn, bad
 * and idle (widgets.ts) are the only colours that carry meaning.
 */
/** Where the page finds the style sheet, relative to the page. */
export const STYLE_PATH = 'dashboard.css';

/** What `GET /dashboard.css` answers. */
export const STYLE = `
:root{--bg:#f5f6f8;--panel:#fff;--fg:#1c2230;--muted:#667085;--line:#e2e5ea;--track:#e8ebf0;
--good:#1a7f37;--good-bg:#e3f4e8;--warn:#a25f00;--warn-bg:#fff2db;--bad:#c4221f;--bad-bg:#fde8e7;
--idle:#667085;--idle-bg:#eef0f3}
@media (prefers-color-scheme:dark){:root{--bg:#101318;--panel:#191e25;--fg:#e2e6ed;--muted:#98a2b3;
--line:#2a313b;--track:#2a313b;
--good:#4cc46f;--good-bg:#15301e;--warn:#e8a63a;--warn-bg:#372a0e;--bad:#f4716a;--bad-bg:#3d1918;
--idle:#98a2b3;--idle-bg:#252b34}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
.top{position:sticky;top:0;z-index:1;display:flex;align-items:baseline;gap:.75rem;padding:.55rem 1.25rem;
background:var(--panel);border-bottom:1px solid var(--line)}
.top h1{margin:0;font-size:1.05rem}
.top .node{font-weight:600}
.refresh{margin-left:auto;color:var(--muted);font-size:.82rem}
.refresh.failing{color:var(--bad);font-weight:600}
main{max-width:1320px;margin:0 auto;padding:.5rem 1.25rem 2rem}
main.stale{opacity:.55}
.generated{margin:.4rem 0 0;color:var(--muted);font-size:.78rem}
.panel{margin:.7rem 0;padding:.7rem 1rem;background:var(--panel);border:1px solid var(--line);
border-radius:8px;overflow-x:auto}
h2{margin:0 0 .55rem;font-size:1rem}
h2 .aside{margin-left:.5rem;color:var(--muted);font-size:.82rem;font-weight:400}
h3{display:flex;align-items:center;justify-content:space-between;gap:.5rem;margin:0 0 .45rem;font-size:.95rem}
h4{margin:.6rem 0 .2rem;color:var(--muted);font-size:.72rem;text-transform:uppercase;letter-spacing:.04em}
.tiles{display:grid;grid-template-columns:repeat(auto-fit,minmax(190px,1fr));gap:.6rem}
.tile{display:flex;flex-direction:column;gap:.2rem;padding:.5rem .7rem;border:1px solid var(--line);
border-radius:6px}
.label{color:var(--muted);font-size:.72rem;text-transform:uppercase;letter-spacing:.04em}
.figure{font-size:1.3rem;font-weight:600;font-variant-numeric:tabular-nums}
.why{color:var(--muted);font-size:.84rem;overflow-wrap:anywhere}
.error,.why.error{color:var(--bad)}
.muted{color:var(--muted)}
.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:.9em}
.badge{display:inline-block;width:max-content;padding:0 .45rem;border-radius:999px;font-size:.76rem;
font-weight:600;line-height:1.55}
.badge.good{color:var(--good);background:var(--good-bg)}
.badge.warn{color:var(--warn);background:var(--warn-bg)}
.badge.bad{color:var(--bad);background:var(--bad-bg)}
.badge.idle{color:var(--idle);background:var(--idle-bg)}
table.grid{width:100%;border-collapse:collapse;font-size:.84rem}
.grid th,.grid td{padding:.28rem .5rem;border-bottom:1px solid var(--line);text-align:left;
vertical-align:middle}
.grid thead th{color:var(--muted);font-size:.72rem;font-weight:600;text-transform:uppercase;
letter-spacing:.03em;white-space:nowrap}
.grid tbody tr:hover{background:var(--bg)}
.grid tbody th{font-weight:600}
.grid .num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
.grid tr.block th{padding-left:1.4rem;font-weight:400}
.grid tr.block td,.grid tr.block th{border-bottom-style:dashed}
table.compact{margin-top:.5rem}
.pools th,.pools td{white-space:nowrap}
.bar-cell{width:24%;min-width:120px}
.bar{height:.6rem;overflow:hidden;background:var(--track);border-radius:999px}
.bar.unknown{background:repeating-linear-gradient(45deg,var(--track) 0 4px,transparent 4px 8px)}
.bar svg{display:block;width:100%;height:100%}
.fill.low{fill:var(--good)}
.fill.high{fill:var(--warn)}
.fill.full{fill:var(--bad)}
.chips{display:flex;flex-wrap:wrap;gap:.4rem;margin:0 0 .6rem;padding:0;list-style:none}
.chip{display:flex;gap:.45rem;padding:.12rem .5rem;border:1px solid var(--line);border-radius:6px;
font-size:.82rem}
.chip b{font-variant-numeric:tabular-nums}
.chip.zero{color:var(--muted)}
.chip.total{border-color:var(--fg)}
.source{font-weight:600;white-space:nowrap}
.reason{max-width:34rem;overflow-wrap:anywhere}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(330px,1fr));gap:.6rem}
.card{min-width:0;overflow-x:auto;padding:.6rem .8rem;border:1px solid var(--line);
border-left:4px solid var(--idle);border-radius:6px}
.card:has(table){grid-column:1/-1}
.card.good{border-left-color:var(--good)}
.card.warn{border-left-color:var(--warn)}
.card.bad{border-left-color:var(--bad)}
.facts{display:grid;grid-template-columns:max-content 1fr;gap:.15rem .75rem;margin:0;font-size:.84rem}
.tiles+.facts{margin-top:.6rem}
.facts dt{color:var(--muted)}
.facts dd{margin:0;overflow-wrap:anywhere}
.list{margin:0;padding-left:1.1rem;font-size:.82rem}
.list li{overflow-wrap:anywhere}
ul.inline{display:flex;flex-wrap:wrap;gap:.1rem .6rem;margin:0;padding:0;list-style:none}
.empty{margin:.25rem 0;color:var(--muted);font-style:italic}
`;
