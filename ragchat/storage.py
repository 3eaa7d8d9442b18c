"""Static files storage: WhiteNoise's hashed and compressed names when `collectstatic` has written
its manifest; the plain names (served from the source folders by WhiteNoise's finders) when it has
not, so a fresh clone runs with DEBUG off without a collectstatic step."""

from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticStorage(CompressedManifestStaticFilesStorage):
    def stored_name(self, name):
        try:
            return super().stored_name(name)
        except ValueError:  # not in the manifest (or no manifest yet): the plain name
            return name
