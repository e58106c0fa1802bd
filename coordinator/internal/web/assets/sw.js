// The app's service worker: it keeps the app's shell (the page, its
// script, style, manifest and icons) so that the app opens from a phone's
// home screen at once, and shows itself when the coordinator cannot be
// reached. It never keeps the API's answers, the event stream or anything
// of the session: those always come from the coordinator, or not at all.
'use strict';

const SHELL = 'gridcity-shell-v1';
const FILES = [
  '/',
  '/manifest.webmanifest',
  '/static/app.css',
  '/static/pages.js',
  '/static/app.js',
  '/static/favicon.svg',
  '/static/icon-192.png',
  '/static/icon-512.png',
  '/static/icon-maskable-512.png',
];

self.addEventListener('install', (e) => {
  e.waitUntil(caches.open(SHELL).then((c) => c.addAll(FILES)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (e) => {
  e.waitUntil(caches.keys()
    .then((keys) => Promise.all(keys.filter((k) => k !== SHELL).map((k) => caches.delete(k))))
    .then(() => self.clients.claim()));
});

self.addEventListener('fetch', (e) => {
  const url = new URL(e.request.url);
  // Everything but the shell — /api/ above all — goes to the network
  // untouched, as if there were no service worker.
  if (e.request.method !== 'GET' || url.origin !== self.location.origin || !FILES.includes(url.pathname)) return;
  // The network first, so that a new coordinator's files show at once;
  // the kept copy only when the network fails.
  e.respondWith(fetch(e.request).then((resp) => {
    if (resp.ok) {
      const copy = resp.clone();
      e.waitUntil(caches.open(SHELL).then((c) => c.put(url.pathname, copy)));
    }
    return resp;
  }).catch(() => caches.match(url.pathname).then((kept) => kept || Response.error())));
});
