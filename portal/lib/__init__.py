"""Helpers with no models, shared by every app (the ground floor's drawer): ``charts`` (server-rendered SVG
charts), ``coded_text`` (stored texts as codes with parameters, rendered per language), ``htmx`` (the
full-page-or-partial predicate), ``http`` (the typed authenticated request), ``slugs`` (ASCII slugs of Chinese
names) and ``strictjson`` (JSON that refuses NaN and duplicate keys). Nothing here imports a model or another app."""
