from django.shortcuts import render


def inspect(request):
    return render(request, "placeholder.html", {"title": "Inspect"})
